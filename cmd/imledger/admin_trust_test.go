package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/cmd/imledger/config"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/kafka/adminclient"
)

// TestAdminTrustWithRealBrokers: a node configured with kafka.brokers refuses an unsigned command
// (signature_required) and a signed one with a plain password (secret_not_sealed), whatever
// admin.allow_unsigned says; `admin send` signs and seals, so its reset_password sets the
// password; without a signing key it refuses to send at all; `deadletter replay --admin` of a
// failure whose password was redacted is refused, telling to send the command again.
func TestAdminTrustWithRealBrokers(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, testenv.Kafka(t), true)
	env.extra = "" // admin.allow_unsigned stays at its default, true: ignored with kafka.brokers
	s := env.start(t, "solo")
	carol := signUp(t, s.base, "carol")
	ctx := testenv.Context(t)
	kcfg := kafka.Config{Brokers: env.brokers, TopicPrefix: "e2e."}

	unsigned, err := adminclient.New(adminclient.Config{Kafka: kcfg, Actor: domain.Actor{Type: domain.ActorAdmin, ID: "ops-1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer unsigned.Close()
	cmd, _ := unsigned.NewCommand("demo", domain.CmdUserBan, map[string]string{"user_id": carol.id})
	if r, err := unsigned.Send(ctx, cmd); err != nil || r.Reason != "signature_required" || r.Actor != nil {
		t.Fatalf("an unsigned command to a node with real brokers: %v %+v", err, r)
	}
	signer, err := admintrust.ParseSigner(env.adminSigning)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := adminclient.New(adminclient.Config{Kafka: kcfg, Signer: signer}) // no seal key
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	cmd, _ = plain.NewCommand("demo", domain.CmdUserResetPassword, map[string]string{"user_id": carol.id, "password": "plain text password"})
	if r, err := plain.Send(ctx, cmd); err != nil || r.Reason != "secret_not_sealed" {
		t.Fatalf("a plain password to a node with real brokers: %v %+v", err, r)
	}

	r := mustAdmin(t, s, "user.reset_password", "demo", fmt.Sprintf(`{"user_id":%q,"password":"sealed new password"}`, carol.id))
	if r.Actor == nil || r.Actor.KeyID != "ops-1" || r.Actor.ID != "ops-1" {
		t.Fatalf("the result's actor: %+v", r.Actor)
	}
	body := `{"tenant":"demo","login":"carol","password":"sealed new password"}`
	if a := call(t, http.MethodPost, s.base+"/v1/im/auth/login", "", "", body); a.status != http.StatusOK {
		t.Fatalf("login with the password set by admin send: %d %s", a.status, a.raw)
	}

	noKey := filepath.Join(t.TempDir(), "no-key.yaml")
	b, err := os.ReadFile(s.file)
	if err != nil {
		t.Fatal(err)
	}
	stripped := strings.Replace(string(b), fmt.Sprintf("signing_key: %q, ", env.adminSigning), "", 1)
	if stripped == string(b) {
		t.Fatal("the configuration has no signing key to leave out")
	}
	if err := os.WriteFile(noKey, []byte(stripped), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, "admin", "send", "--type", "user.kick", "--tenant", "demo", "--payload", fmt.Sprintf(`{"user_id":%q}`, carol.id), "--config", noKey)
	if err == nil || !strings.Contains(err.Error(), "signing key is required") {
		t.Fatalf("admin send without a signing key: %v", err)
	}

	// A failure recorded for a password reset holds the password redacted: it cannot be replayed.
	conn, err := pgx.Connect(ctx, env.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var id int64
	if err := conn.QueryRow(ctx, `INSERT INTO admin_command_failures (consumer_group, tenant_id, event_id, command_type, command, error, attempts)
		VALUES ('imledger.admin.commands.v1', 'demo', gen_random_uuid(), 'user.reset_password', $1::jsonb, 'timeout', 6) RETURNING id`,
		fmt.Sprintf(`{"event_id":"%s","tenant_id":"demo","event_type":"user.reset_password","version":1,"payload":{"user_id":%q,"password":{"redacted":true}}}`,
			"01a2340e-5b6c-7d4e-9f00-1a2b3c4d5e6f", carol.id)).Scan(&id); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, "deadletter", "replay", "--admin", fmt.Sprint(id), "--config", s.file)
	if err == nil || !strings.Contains(err.Error(), "redacted") || !strings.Contains(err.Error(), "send the command again") {
		t.Fatalf("deadletter replay --admin of a redacted password reset: %v", err)
	}
	out, _, err := runCLI(t, "deadletter", "list", "--admin", "--status", "open", "--config", s.file)
	if err != nil || !strings.Contains(out, "user.reset_password") {
		t.Fatalf("the refused replay closed the failure: %v\n%s", err, out)
	}
}

var envLine = regexp.MustCompile(`(?m)^(IM_[A-Z_]+)='([^']*)'$`)

// keygen runs `admin keygen` with args and returns the variables it printed.
func keygen(t *testing.T, args ...string) map[string]string {
	t.Helper()
	out, errOut, err := runCLI(t, append([]string{"admin", "keygen"}, args...)...)
	if err != nil {
		t.Fatalf("admin keygen %v: %v\n%s", args, err, errOut)
	}
	vars := map[string]string{}
	for _, m := range envLine.FindAllStringSubmatch(out, -1) {
		vars[m[1]] = m[2]
	}
	return vars
}

// admin keygen prints key pairs whose halves the configuration takes and that work together: a
// command signed with the private half verifies with the public one (Ed25519 and HMAC, scoped
// as asked), and a secret sealed to the printed seal key opens with the printed private key.
func TestAdminKeygen(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--id", "k1", "--actor", "system/billing", "--scope", "acme"}, {"--hmac", "--actor", "ops-9"}} {
		vars := keygen(t, args...)
		cfg, err := config.Load(config.Sources{Environ: []string{"IM_ADMIN_SIGNING_KEY=" + vars["IM_ADMIN_SIGNING_KEY"],
			"IM_ADMIN_PRODUCER_KEYS=" + vars["IM_ADMIN_PRODUCER_KEYS"]}})
		if err != nil {
			t.Fatalf("keygen %v: the configuration refuses its keys: %v", args, err)
		}
		signer, err := cfg.AdminSigner("")
		if err != nil {
			t.Fatal(err)
		}
		a, _ := cfg.AdminConsumer()
		v, err := admintrust.NewVerifier(time.Minute, time.Second, a.ProducerKeys...)
		if err != nil {
			t.Fatal(err)
		}
		h := admintrust.Headers{}
		for k, val := range signer.Sign([]byte("key"), []byte("value"), time.Now()) {
			h[k] = []string{val}
		}
		key, err := v.Verify(h, []byte("key"), []byte("value"), time.Now())
		if err != nil {
			t.Fatalf("keygen %v: a signature does not verify: %v", args, err)
		}
		switch args[0] {
		case "--id":
			if key.ID() != "k1" || key.Scope() != "acme" || key.Identity().Type != "system" || key.Algorithm() != admintrust.AlgEd25519 {
				t.Fatalf("keygen %v: %v", args, key)
			}
		default:
			if key.Algorithm() != admintrust.AlgHMACSHA256 || !key.Platform() || key.Identity().ID != "ops-9" || !strings.HasPrefix(key.ID(), "ops-9-") {
				t.Fatalf("keygen %v: %v", args, key)
			}
		}
	}
	vars := keygen(t, "--secrets", "--id", "cs-9")
	cfg, err := config.Load(config.Sources{Environ: []string{"IM_ADMIN_COMMAND_SECRET_KEYS=" + vars["IM_ADMIN_COMMAND_SECRET_KEYS"],
		"IM_ADMIN_SEAL_KEY=" + vars["IM_ADMIN_SEAL_KEY"]}})
	if err != nil {
		t.Fatal(err)
	}
	seal, err := cfg.AdminSealKey("")
	if err != nil || seal == nil || seal.ID() != "cs-9" {
		t.Fatalf("seal key %v %v", seal, err)
	}
	a, _ := cfg.AdminConsumer()
	opener, _ := admintrust.NewOpener(a.SecretKeys...)
	c := admintrust.SecretContext{TenantID: "acme", EventType: "user.reset_password", Field: "password"}
	sealed, err := seal.Seal(c, []byte("hunter2"))
	if err != nil {
		t.Fatal(err)
	}
	if text, err := opener.Open(c, sealed); err != nil || string(text) != "hunter2" {
		t.Fatalf("open: %q %v", text, err)
	}
	if b, _ := json.Marshal(sealed); strings.Contains(string(b), "hunter2") {
		t.Fatal("the sealed secret holds its text")
	}
}
