package domain_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/imledger/imledger/domain"
)

const sealedJSON = `{"sealed":"hpke-x25519-sha256-aes256gcm","key_id":"cs1","enc":"ZW5j","ciphertext":"Y3Q="}`

func TestSecretWireForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		in       string
		plain    string
		sealed   bool
		redacted bool
		zero     bool
		bad      bool
	}{
		{name: "plain", in: `"hunter2 is long"`, plain: "hunter2 is long"},
		{name: "sealed", in: sealedJSON, sealed: true},
		{name: "redacted", in: `{"redacted":true}`, redacted: true},
		{name: "null", in: `null`, zero: true},
		{name: "number", in: `42`, bad: true},
		{name: "sealed without ciphertext", in: `{"sealed":"x","key_id":"k","enc":"ZQ=="}`, bad: true},
		{name: "sealed with an extra field", in: `{"sealed":"x","key_id":"k","enc":"ZQ==","ciphertext":"Yw==","plain":"p"}`, bad: true},
		{name: "marker false", in: `{"redacted":false}`, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var s domain.Secret
			err := json.Unmarshal([]byte(tc.in), &s)
			if tc.bad {
				if err == nil {
					t.Fatalf("%s was taken as a secret", tc.in)
				}
				if strings.Contains(err.Error(), "Yw==") || strings.Contains(err.Error(), "42") {
					t.Fatalf("the error repeats the value: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, isPlain := s.Plain()
			_, isSealed := s.Sealed()
			if p != tc.plain || isPlain != (tc.plain != "") || isSealed != tc.sealed || s.Redacted() != tc.redacted || s.IsZero() != tc.zero {
				t.Fatalf("%s: plain %q %v sealed %v redacted %v zero %v", tc.in, p, isPlain, isSealed, s.Redacted(), s.IsZero())
			}
			out, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			var back domain.Secret
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatalf("%s does not read back: %v", out, err)
			}
			if bp, _ := back.Plain(); bp != p || back.Redacted() != s.Redacted() || back.IsZero() != s.IsZero() {
				t.Fatalf("round trip of %s: %s", tc.in, out)
			}
		})
	}
}

// A secret never prints its text, however it is formatted or logged (JSON is the wire form: a
// plain secret is sealed before it is marshalled).
func TestSecretNeverPrintsItsText(t *testing.T) {
	t.Parallel()
	p := domain.UserResetPasswordPayload{UserID: 42, Password: domain.PlainSecret("correct horse battery")}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "password", p.Password)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "password", p.Password)
	out := fmt.Sprintf("%v %+v %#v %s", p, p, p, p.Password) + buf.String()
	if strings.Contains(out, "correct horse") {
		t.Fatalf("the secret was printed: %s", out)
	}
}

func TestRedactReplacesEverySecretField(t *testing.T) {
	t.Parallel()
	info, _ := domain.LookupAdminCommand(domain.CmdUserResetPassword)
	if got := info.SecretFields(); len(got) != 1 || got[0] != "password" {
		t.Fatalf("secret fields of user.reset_password: %v", got)
	}
	for _, tc := range []struct {
		name, in string
		changed  bool
		kind     domain.SecretKind
	}{
		{"plain", `{"user_id":"42","password":"correct horse"}`, true, domain.SecretPlain},
		{"sealed", `{"user_id":"42","password":` + sealedJSON + `}`, true, domain.SecretSealed},
		{"already redacted", `{"user_id":"42","password":{"redacted":true}}`, false, domain.SecretRedacted},
		{"absent", `{"user_id":"42"}`, false, domain.SecretAbsent},
		// encoding/json fills the field from a key of any case, Unicode folds included.
		{"upper case", `{"user_id":"42","PASSWORD":"correct horse"}`, true, domain.SecretPlain},
		{"long s", `{"user_id":"42","pasſword":"correct horse"}`, true, domain.SecretPlain},
		{"twice, plain last", `{"user_id":"42","password":` + sealedJSON + `,"Password":"correct horse"}`, true, domain.SecretPlain},
		{"number", `{"user_id":"42","password":7}`, true, domain.SecretOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			kinds, err := info.SecretFieldKinds(json.RawMessage(tc.in))
			if err != nil || kinds["password"] != tc.kind {
				t.Fatalf("kinds %v %v, want %v", kinds, err, tc.kind)
			}
			out, changed := info.Redact(json.RawMessage(tc.in))
			if changed != tc.changed {
				t.Fatalf("changed %v, want %v: %s", changed, tc.changed, out)
			}
			if strings.Contains(string(out), "correct horse") || strings.Contains(string(out), "Y3Q=") {
				t.Fatalf("redacted payload still holds the secret: %s", out)
			}
			var p domain.UserResetPasswordPayload
			if err := json.Unmarshal(out, &p); err != nil || (tc.kind != domain.SecretAbsent && !p.Password.Redacted()) {
				t.Fatalf("redacted payload %s reads as %+v, %v", out, p, err)
			}
		})
	}
	if out, changed := info.Redact(json.RawMessage(`"correct horse"`)); !changed || string(out) != `{"redacted":true}` {
		t.Fatalf("a payload that is no object: %s %v", out, changed)
	}
	ban, _ := domain.LookupAdminCommand(domain.CmdUserBan)
	in := json.RawMessage(`{"user_id":"42", "reason":"spam"}`)
	if out, changed := ban.Redact(in); changed || !bytes.Equal(out, in) || ban.SecretFields() != nil {
		t.Fatalf("a command without secrets was changed: %s", out)
	}
}

func TestPlatformCommands(t *testing.T) {
	t.Parallel()
	for _, i := range domain.AdminCommands() {
		want := strings.HasPrefix(string(i.Type), "tenant.")
		if i.Platform != want {
			t.Errorf("%s: Platform %v, want %v", i.Type, i.Platform, want)
		}
	}
}
