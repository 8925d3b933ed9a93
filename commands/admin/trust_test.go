package admin_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/admin"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
	"github.com/imledger/imledger/internal/testenv"
)

// rawRecord is a command record as a producer might write it: cmd's JSON, changed by mutate when
// set, signed by s at time at when s is set (the signature made before mutate runs, so a mutation
// breaks it). Secrets are not sealed.
func rawRecord(t *testing.T, cmd domain.AdminCommand, s *admintrust.Signer, at time.Time, mutate func([]byte) []byte) *sarama.ProducerMessage {
	t.Helper()
	body := marshal(t, cmd)
	key := cmd.TenantID + ":" + cmd.EventType
	m := &sarama.ProducerMessage{Topic: commandTopic, Key: sarama.StringEncoder(key)}
	if s != nil {
		for k, v := range s.Sign([]byte(key), body, at) {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(v)})
		}
	}
	if mutate != nil {
		body = mutate(body)
	}
	m.Value = sarama.ByteEncoder(body)
	return m
}

// produceRecord produces a copy of m (key, value and headers), so m can be produced again.
func (e *env) produceRecord(m *sarama.ProducerMessage) {
	e.t.Helper()
	c := &sarama.ProducerMessage{Topic: commandTopic, Key: m.Key, Value: m.Value, Headers: append([]sarama.RecordHeader(nil), m.Headers...)}
	if _, _, err := e.producer.SendMessage(c); err != nil {
		e.t.Fatal(err)
	}
}

// TestRefusedRecordsChangeNothing: with unsigned commands refused (real brokers), a record that is
// not signed, whose signature does not verify (Ed25519 and HMAC), that is signed by a key the
// node does not know, outside the replay window, by a key of another tenant or a tenant key for a
// platform command, for an actor the key is not, or that carries a plain or a redacted password,
// is answered rejected with its reason and no actor; it appends no event and leaves no ledger row.
func TestRefusedRecordsChangeNothing(t *testing.T) {
	t.Parallel()
	tid, other := newTenantID(t), newTenantID(t)
	ten := tid.String()
	hmacSigner, hmacKey := newKey(t, admintrust.AlgHMACSHA256, "hmac-1", admintrust.PlatformScope, ops)
	tenantSigner, tenantKey := newKey(t, admintrust.AlgEd25519, "tenant-1", ten, domain.Actor{Type: domain.ActorSystem, ID: "crm"})
	otherSigner, otherKey := newKey(t, admintrust.AlgHMACSHA256, "other-1", other.String(), ops)
	foreignSigner, _ := newKey(t, admintrust.AlgEd25519, "foreign-1", admintrust.PlatformScope, ops) // configured nowhere
	impostor, _ := newKey(t, admintrust.AlgHMACSHA256, "hmac-1", admintrust.PlatformScope, ops)      // a known id, other material
	e := newEnv(t, envOpts{signed: true, keys: []admintrust.ProducerKey{hmacKey, tenantKey, otherKey}})
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	e.ok(command(other.String(), domain.CmdTenantProvision, `{}`))
	e.accountsOf(tid, 42)
	base := e.events(tid)

	ban := func() domain.AdminCommand { return command(ten, domain.CmdUserBan, `{"user_id":"42","reason":"spam"}`) }
	changeReason := func(b []byte) []byte { return bytes.Replace(b, []byte(`"spam"`), []byte(`"spam!"`), 1) }
	now := time.Now()
	for _, c := range []struct {
		name   string
		record func(cmd domain.AdminCommand) *sarama.ProducerMessage
		cmd    domain.AdminCommand
		reason string
	}{
		{"unsigned", func(c domain.AdminCommand) *sarama.ProducerMessage { return rawRecord(t, c, nil, now, nil) }, ban(), admin.ReasonSignatureRequired},
		{"ed25519 signature over another value", func(c domain.AdminCommand) *sarama.ProducerMessage {
			return rawRecord(t, c, e.platform, time.Now(), changeReason)
		}, ban(), admin.ReasonSignatureInvalid},
		{"hmac signature over another value", func(c domain.AdminCommand) *sarama.ProducerMessage {
			return rawRecord(t, c, hmacSigner, time.Now(), changeReason)
		}, ban(), admin.ReasonSignatureInvalid},
		{"hmac signature over another record key", func(c domain.AdminCommand) *sarama.ProducerMessage {
			m := rawRecord(t, c, hmacSigner, time.Now(), nil)
			m.Key = sarama.StringEncoder(ten + ":another")
			return m
		}, ban(), admin.ReasonSignatureInvalid},
		{"a known key id with other material", func(c domain.AdminCommand) *sarama.ProducerMessage {
			return rawRecord(t, c, impostor, time.Now(), nil)
		}, ban(), admin.ReasonSignatureInvalid},
		{"a foreign key", func(c domain.AdminCommand) *sarama.ProducerMessage {
			return rawRecord(t, c, foreignSigner, time.Now(), nil)
		}, ban(), admin.ReasonUnknownKey},
		{"signed ten minutes ago", func(c domain.AdminCommand) *sarama.ProducerMessage {
			return rawRecord(t, c, e.platform, time.Now().Add(-10*time.Minute), nil)
		}, ban(), admin.ReasonStaleCommand},
		{"signed five minutes from now", func(c domain.AdminCommand) *sarama.ProducerMessage {
			return rawRecord(t, c, hmacSigner, time.Now().Add(5*time.Minute), nil)
		}, ban(), admin.ReasonStaleCommand},
		{"a key of another tenant", func(c domain.AdminCommand) *sarama.ProducerMessage {
			return rawRecord(t, c, otherSigner, time.Now(), nil)
		}, ban(), admin.ReasonKeyScope},
		{"a tenant key for a platform command", func(c domain.AdminCommand) *sarama.ProducerMessage {
			return rawRecord(t, c, tenantSigner, time.Now(), nil)
		}, func() domain.AdminCommand {
			c := command(ten, domain.CmdTenantSuspend, `{"reason":"mine"}`)
			c.Actor = tenantSigner.Identity()
			return c
		}(), admin.ReasonKeyScope},
		{"an actor the key is not", func(c domain.AdminCommand) *sarama.ProducerMessage {
			return rawRecord(t, c, e.platform, time.Now(), nil)
		}, func() domain.AdminCommand {
			c := ban()
			c.Actor = domain.Actor{Type: domain.ActorAdmin, ID: "root"}
			return c
		}(), admin.ReasonActorMismatch},
		{"a plain password", func(c domain.AdminCommand) *sarama.ProducerMessage {
			return rawRecord(t, c, e.platform, time.Now(), nil)
		}, command(ten, domain.CmdUserResetPassword, `{"user_id":"42","password":"correct horse battery"}`), admin.ReasonSecretNotSealed},
		{"a redacted password", func(c domain.AdminCommand) *sarama.ProducerMessage {
			return rawRecord(t, c, e.platform, time.Now(), nil)
		}, command(ten, domain.CmdUserResetPassword, `{"user_id":"42","password":{"redacted":true}}`), admin.ReasonSecretRedacted},
	} {
		e.produceRecord(c.record(c.cmd))
		r := e.await(c.cmd.EventID, 1)
		if r.Status != domain.AdminRejected || r.Reason != c.reason {
			t.Errorf("%s: %s %s %v, want rejected %s", c.name, r.Status, r.Reason, r.Details, c.reason)
		}
		if r.Actor != nil || r.CommandEventID != c.cmd.EventID.String() {
			t.Errorf("%s: the refusal names actor %+v, command %s", c.name, r.Actor, r.CommandEventID)
		}
		if n := e.ledgerRows(c.cmd.EventID); n != 0 {
			t.Errorf("%s: %d ledger rows", c.name, n)
		}
	}
	if got := e.events(tid); got != base {
		t.Fatalf("refused records appended %d events", got-base)
	}
	if err := e.guard.Check(tid, 42, time.Now()); err != nil {
		t.Fatalf("user 42 was banned by a refused record: %v", err)
	}
	if !strings.Contains(e.logs.String(), "reason="+admin.ReasonSignatureInvalid) {
		t.Error("the refusals were not logged")
	}
}

// TestForgedRecordCannotTakeAGenuineEventID: a forged record (its signature does not verify)
// naming the event_id of a genuine command that comes later is refused without writing anything,
// so the genuine command still runs; and once it ran, a forged copy under its event_id is refused
// instead of being answered with its result.
func TestForgedRecordCannotTakeAGenuineEventID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{signed: true})
	tid := newTenantID(t)
	ten := tid.String()
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	e.accountsOf(tid, 42)
	genuine := command(ten, domain.CmdUserBan, `{"user_id":"42"}`)
	forged := genuine
	forged.EventType, forged.Payload = string(domain.CmdTenantSuspend), json.RawMessage(`{}`)
	e.produceRecord(rawRecord(t, forged, nil, time.Now(), nil))
	if r := e.await(genuine.EventID, 1); r.Reason != admin.ReasonSignatureRequired {
		t.Fatalf("the forged record: %+v", r)
	}
	e.produceSigned(genuine, e.platform, time.Now())
	if r := e.await(genuine.EventID, 2); r.Status != domain.AdminSucceeded || r.EventType != string(domain.CmdUserBan) {
		t.Fatalf("the genuine command: %+v", r)
	}
	e.produceRecord(rawRecord(t, genuine, e.platform, time.Now(), func(b []byte) []byte { return bytes.Replace(b, []byte(`"42"`), []byte(`"43"`), 1) }))
	if r := e.await(genuine.EventID, 3); r.Reason != admin.ReasonSignatureInvalid || len(r.Result) != 0 {
		t.Fatalf("a forged copy after the genuine command: %+v", r)
	}
	if info, _ := e.registry.Get(testenv.Context(t), tid); info.Status != "active" {
		t.Fatalf("the forged suspend ran: %+v", info)
	}
}

// TestSignedCommandsActAsTheKeyIdentity: a command signed with an Ed25519 or an HMAC key runs as
// the key's identity (an envelope without actor takes it), and its result and events carry the
// key id.
func TestSignedCommandsActAsTheKeyIdentity(t *testing.T) {
	t.Parallel()
	billing := domain.Actor{Type: domain.ActorSystem, ID: "billing"}
	hmacSigner, hmacKey := newKey(t, admintrust.AlgHMACSHA256, "hmac-1", admintrust.PlatformScope, billing)
	e := newEnv(t, envOpts{signed: true, keys: []admintrust.ProducerKey{hmacKey}})
	ctx := testenv.Context(t)
	tid := newTenantID(t)
	ten := tid.String()
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	e.accountsOf(tid, 42, 43)
	for _, c := range []struct {
		name   string
		signer *admintrust.Signer
		user   domain.UserID
		actor  domain.Actor
	}{
		{"ed25519", e.platform, 42, ops},
		{"hmac, no actor in the envelope", hmacSigner, 43, domain.Actor{}},
	} {
		cmd := command(ten, domain.CmdUserBan, fmt.Sprintf(`{"user_id":"%d"}`, c.user))
		cmd.Actor = c.actor
		r := e.sendSigned(cmd, c.signer)
		want := c.signer.Identity()
		if r.Status != domain.AdminSucceeded || r.Actor == nil || *r.Actor != want {
			t.Fatalf("%s: %+v actor %+v, want %+v", c.name, r, r.Actor, want)
		}
		evs, err := e.store.ReadStream(ctx, tid, domain.AccountStreamID(c.user), 0, 0)
		if err != nil || len(evs) != 1 || evs[0].Actor != want || evs[0].CausationID != cmd.EventID.String() {
			t.Fatalf("%s: events %+v %v, want actor %+v", c.name, evs, err, want)
		}
	}
}

// TestReplayedSignedRecord: the same signed record produced again within the replay window is
// answered with the first result, byte for byte, and runs once; produced again after the window
// it is refused stale_command and still runs once.
func TestReplayedSignedRecord(t *testing.T) {
	t.Parallel()
	const window = 4 * time.Second
	cfg := admin.Config{ReplayWindow: window, ClockLeeway: 50 * time.Millisecond,
		Retry: admin.RetryConfig{MaxRetries: 3, InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond}}
	e := newEnv(t, envOpts{signed: true, config: &cfg})
	ctx := testenv.Context(t)
	tid := newTenantID(t)
	ten := tid.String()
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	e.accountsOf(tid, 42)
	cmd := command(ten, domain.CmdUserBan, `{"user_id":"42"}`)
	signedAt := time.Now().Add(-time.Second)
	rec := e.produceSigned(cmd, e.platform, signedAt)
	first := e.await(cmd.EventID, 1)
	if first.Status != domain.AdminSucceeded {
		t.Fatalf("first: %+v", first)
	}
	e.produceRecord(rec)
	second := e.await(cmd.EventID, 2)
	a, _ := json.Marshal(first)
	b, _ := json.Marshal(second)
	if !bytes.Equal(a, b) {
		t.Fatalf("the replay within the window got another answer:\n%s\n%s", a, b)
	}
	time.Sleep(time.Until(signedAt.Add(window + 200*time.Millisecond)))
	e.produceRecord(rec)
	if third := e.await(cmd.EventID, 3); third.Status != domain.AdminRejected || third.Reason != admin.ReasonStaleCommand ||
		third.Details["key_id"] != "platform-1" || third.Details["signed_at"] == nil {
		t.Fatalf("the replay after the window: %+v", third)
	}
	if evs, _ := e.store.ReadStream(ctx, tid, domain.AccountStreamID(42), 0, 0); len(evs) != 1 {
		t.Fatalf("the ban ran %d times", len(evs))
	}
}

// TestProducerKeyRotation: two keys of one identity are valid at once; once the old one is
// removed from the node's keys its commands are refused unknown_key and the new one's still run.
func TestProducerKeyRotation(t *testing.T) {
	t.Parallel()
	oldSigner, oldKey := newKey(t, admintrust.AlgEd25519, "ops-2025", admintrust.PlatformScope, ops)
	newSigner, newKey := newKey(t, admintrust.AlgEd25519, "ops-2026", admintrust.PlatformScope, ops)
	e := newEnv(t, envOpts{signed: true, keys: []admintrust.ProducerKey{oldKey, newKey}})
	tid := newTenantID(t)
	ten := tid.String()
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	e.accountsOf(tid, 42)
	for _, s := range []*admintrust.Signer{oldSigner, newSigner} {
		if r := e.sendSigned(command(ten, domain.CmdUserKick, `{"user_id":"42"}`), s); r.Status != domain.AdminSucceeded || r.Actor.KeyID != s.KeyID() {
			t.Fatalf("%s during the rotation: %+v", s.KeyID(), r)
		}
	}
	e.stop(e.consumer)
	e.startConsumer("rotated", admin.Config{ProducerKeys: []admintrust.ProducerKey{e.keys[0], newKey},
		Retry: admin.RetryConfig{MaxRetries: 3, InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond}})
	if r := e.sendSigned(command(ten, domain.CmdUserKick, `{"user_id":"42"}`), oldSigner); r.Reason != admin.ReasonUnknownKey {
		t.Fatalf("the removed key: %+v", r)
	}
	if r := e.sendSigned(command(ten, domain.CmdUserKick, `{"user_id":"42"}`), newSigner); r.Status != domain.AdminSucceeded {
		t.Fatalf("the new key after the rotation: %+v", r)
	}
}

// TestSealedPassword: a sealed password is opened only for the command and node it was sealed
// for: one sealed for another command, or to a key the node does not hold, is rejected
// secret_unreadable and the password stays; one sealed to either of two command-secrets keys
// (a rotation) sets it.
func TestSealedPassword(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{signed: true})
	second, err := admintrust.GenerateOpenKey("cs-2")
	if err != nil {
		t.Fatal(err)
	}
	e.stop(e.consumer)
	e.openKeys = append(e.openKeys, second)
	e.startConsumer("two-secret-keys", admin.Config{})
	ctx := testenv.Context(t)
	tid := newTenantID(t)
	ten := tid.String()
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	reg, err := e.accounts.Register(ctx, account.Register{Tenant: tid, Login: "carol", Password: "first password"})
	if err != nil {
		t.Fatal(err)
	}
	reset := func(password string) domain.AdminCommand {
		return command(ten, domain.CmdUserResetPassword, fmt.Sprintf(`{"user_id":"%s","password":%q}`, reg.User, password))
	}
	stranger, _ := admintrust.GenerateOpenKey("cs-9")
	sealedFor := func(k admintrust.SealKey, cmd domain.AdminCommand, ctxOf domain.AdminCommand) domain.AdminCommand {
		s, err := k.Seal(admintrust.ContextOf(ctxOf, "password"), []byte("stolen password"))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Payload, _ = json.Marshal(domain.UserResetPasswordPayload{UserID: reg.User, Password: domain.SealedSecretOf(s)})
		return cmd
	}
	elsewhere := reset("")
	for _, cmd := range []domain.AdminCommand{
		sealedFor(e.sealKey, reset(""), elsewhere),          // sealed for another command
		sealedFor(stranger.SealKey(), reset(""), reset("")), // to a key the node does not hold
	} {
		// Sealed already, so sendSigned's sealing keeps it.
		if r := e.sendSigned(cmd, e.platform); r.Reason != admin.ReasonSecretUnreadable || r.Details["field"] != "password" {
			t.Fatalf("%+v", r)
		}
	}
	if _, err := e.accounts.Login(ctx, tid, "carol", "stolen password"); err == nil {
		t.Fatal("an unreadable secret set the password")
	}
	for i, k := range []admintrust.SealKey{e.sealKey, second.SealKey()} {
		pw := fmt.Sprintf("rotated password %d", i)
		cmd := reset(pw)
		var err error
		if cmd.Payload, err = admintrust.SealPayload(k, cmd); err != nil {
			t.Fatal(err)
		}
		if r := e.sendSigned(cmd, e.platform); r.Status != domain.AdminSucceeded {
			t.Fatalf("sealed to %s: %+v", k.ID(), r)
		}
		if u, err := e.accounts.Login(ctx, tid, "carol", pw); err != nil || u != reg.User {
			t.Fatalf("login with the password sealed to %s: %v %v", k.ID(), u, err)
		}
	}
}

// TestUnsignedModeStillVerifiesWhatIsSigned: where unsigned commands are accepted (the embedded
// broker), a signed record is verified all the same, and an unsigned one may not claim a key id.
func TestUnsignedModeStillVerifiesWhatIsSigned(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	tid := newTenantID(t)
	ten := tid.String()
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	e.accountsOf(tid, 42)
	base := e.events(tid)
	bad := command(ten, domain.CmdUserBan, `{"user_id":"42"}`)
	e.produceRecord(rawRecord(t, bad, e.platform, time.Now(), func(b []byte) []byte { return bytes.Replace(b, []byte(`"42"`), []byte(`"43"`), 1) }))
	if r := e.await(bad.EventID, 1); r.Reason != admin.ReasonSignatureInvalid {
		t.Fatalf("a bad signature with unsigned commands accepted: %+v", r)
	}
	claims := command(ten, domain.CmdUserBan, `{"user_id":"42"}`)
	claims.Actor.KeyID = "platform-1"
	e.rejected(claims, admin.ReasonActorMismatch)
	if got := e.events(tid); got != base {
		t.Fatalf("%d events appended", got-base)
	}
	ok := command(ten, domain.CmdUserBan, `{"user_id":"42"}`)
	if r := e.send(ok); r.Status != domain.AdminSucceeded || r.Actor == nil || *r.Actor != ok.Actor {
		t.Fatalf("an unsigned command: %+v", r)
	}
	if r := e.sendSigned(command(ten, domain.CmdUserUnban, `{"user_id":"42"}`), e.platform); r.Actor == nil || r.Actor.KeyID != "platform-1" {
		t.Fatalf("a signed command: %+v", r)
	}
}
