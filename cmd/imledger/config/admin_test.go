package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/imledger/imledger/cmd/imledger/config"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
)

func generated(t *testing.T, alg admintrust.Algorithm, id, scope string) admintrust.GeneratedKey {
	t.Helper()
	g, err := admintrust.GenerateProducerKey(alg, id, scope, domain.Actor{Type: domain.ActorAdmin, ID: "ops-7"})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The admin keys load from the environment (comma-separated specs) and from YAML (a list), the
// consumer gets them parsed, unsigned commands are allowed only with the embedded broker, and
// the tools' seal key defaults to the public half of the first command-secrets key.
func TestAdminKeys(t *testing.T) {
	t.Parallel()
	ed, mac := generated(t, admintrust.AlgEd25519, "ops-1", "*"), generated(t, admintrust.AlgHMACSHA256, "acme-1", "acme")
	secrets, err := admintrust.GenerateSecretsKey("cs-1")
	if err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, fmt.Sprintf("admin:\n  producer_keys: [%q, %q]\n  command_secret_keys: [%q]\n  signing_key: %q\n",
		ed.Producer, mac.Producer, secrets.Open, ed.Signer))
	for _, tc := range []struct {
		name     string
		args     []string
		env      []string
		unsigned bool
	}{
		{"environment, embedded broker", nil, []string{"IM_ADMIN_PRODUCER_KEYS=" + ed.Producer + " , " + mac.Producer,
			"IM_ADMIN_COMMAND_SECRET_KEYS=" + secrets.Open, "IM_ADMIN_SIGNING_KEY=" + ed.Signer}, true},
		{"environment, real brokers", nil, []string{"IM_ADMIN_PRODUCER_KEYS=" + ed.Producer + "," + mac.Producer,
			"IM_ADMIN_COMMAND_SECRET_KEYS=" + secrets.Open, "IM_ADMIN_SIGNING_KEY=" + ed.Signer, "IM_KAFKA_BROKERS=k1:9092"}, false},
		{"file, real brokers", []string{"--config", file}, []string{"IM_KAFKA_BROKERS=k1:9092"}, false},
		{"file, embedded broker, allow_unsigned off", []string{"--config", file}, []string{"IM_ADMIN_ALLOW_UNSIGNED=false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := config.Load(config.Sources{Flags: flags(t, tc.args...), Environ: tc.env})
			if err != nil {
				t.Fatal(err)
			}
			a, err := c.AdminConsumer()
			if err != nil {
				t.Fatal(err)
			}
			if len(a.ProducerKeys) != 2 || a.ProducerKeys[0].ID() != "ops-1" || !a.ProducerKeys[0].Platform() ||
				a.ProducerKeys[1].Scope() != "acme" || a.ProducerKeys[1].Algorithm() != admintrust.AlgHMACSHA256 {
				t.Fatalf("producer keys %v", a.ProducerKeys)
			}
			if len(a.SecretKeys) != 1 || a.SecretKeys[0].ID() != "cs-1" || a.AllowUnsigned != tc.unsigned {
				t.Fatalf("secret keys %v, allow unsigned %v", a.SecretKeys, a.AllowUnsigned)
			}
			s, err := c.AdminSigner("")
			if err != nil || s == nil || s.KeyID() != "ops-1" {
				t.Fatalf("signer %v %v", s, err)
			}
			k, err := c.AdminSealKey("")
			if err != nil || k == nil || k.Spec() != secrets.Seal {
				t.Fatalf("seal key %v %v, want %s", k, err, secrets.Seal)
			}
			if printed := fmt.Sprintf("%v %+v %#v", c.Admin, c.Admin, c.Admin); strings.Contains(printed, secretOf(mac.Producer)) ||
				strings.Contains(printed, secretOf(ed.Signer)) || strings.Contains(printed, secretOf(secrets.Open)) {
				t.Fatalf("the admin section prints its keys: %s", printed)
			}
		})
	}
}

// secretOf is the key material of a spec.
func secretOf(spec string) string { return spec[strings.LastIndex(spec, ";")+1:] }

// A bad key spec is refused at load time naming the key and the field, never its material.
func TestAdminKeysRefused(t *testing.T) {
	t.Parallel()
	ed := generated(t, admintrust.AlgEd25519, "ops-1", "*")
	mac := generated(t, admintrust.AlgHMACSHA256, "ops-2", "*")
	short := strings.Replace(mac.Producer, secretOf(mac.Producer), "hmac-sha256=c2hvcnQgc2VjcmV0", 1)
	for _, tc := range []struct {
		env  string
		want string
	}{
		{"IM_ADMIN_PRODUCER_KEYS=" + short, "admin.producer_keys: key 1"},
		{"IM_ADMIN_PRODUCER_KEYS=" + ed.Producer + "," + ed.Producer, "admin.producer_keys"},
		{"IM_ADMIN_PRODUCER_KEYS=" + strings.Replace(ed.Producer, "scope=*", "scope=Bad Tenant", 1), "scope"},
		{"IM_ADMIN_COMMAND_SECRET_KEYS=id=cs-1;x25519=c2hvcnQgc2VjcmV0", "admin.command_secret_keys: key 1"},
		{"IM_ADMIN_SIGNING_KEY=" + mac.Producer, "admin.signing_key"},
		{"IM_ADMIN_SEAL_KEY=id=cs-1", "admin.seal_key"},
		{"IM_ADMIN_REPLAY_WINDOW=-1s", "admin.replay_window"},
	} {
		_, err := config.Load(config.Sources{Environ: []string{tc.env}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.env, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "c2hvcnQ") || strings.Contains(err.Error(), secretOf(mac.Producer)[len("hmac-sha256="):]) {
			t.Errorf("%s: the error shows key material: %v", tc.env, err)
		}
	}
}
