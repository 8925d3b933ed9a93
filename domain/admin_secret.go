package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
)

// Secret is a secret field of an admin command payload: a password today, a code or a token
// tomorrow. Typing a payload field Secret is what marks it secret (DESIGN §7a "No secret at
// rest"): producers seal it to the node's command-secrets key, the consumer opens it only right
// before the handler that needs it, and every copy of a command that is stored or re-published
// (failures, dead letters, results, logs) holds it redacted.
//
// On the wire a Secret is one of: a SealedSecret object; the redaction marker
// {"redacted": true}; or a plain JSON string, which the consumer takes only where it accepts
// unsigned commands (the embedded broker) and refuses otherwise. A Secret never shows its text
// to fmt or log/slog ("[secret]"); JSON is its wire form, so a plain Secret marshals as its
// text: seal it first (admintrust.SealPayload). The zero Secret is absent (JSON null).
type Secret struct {
	plain    string
	isPlain  bool
	sealed   *SealedSecret
	redacted bool
}

// SealedSecret is a Secret sealed with HPKE to one of the node's command-secrets keys: the
// encapsulated key and the ciphertext, both standard base64. Only the node holding KeyID's
// private key can open it, and only for the command and field it was sealed for (see
// domain/admintrust).
type SealedSecret struct {
	// Sealed names the HPKE suite; the one there is is "hpke-x25519-sha256-aes256gcm".
	Sealed string `json:"sealed"`
	// KeyID names the command-secrets key it is sealed to.
	KeyID string `json:"key_id"`
	// Enc is the HPKE encapsulated key, standard base64.
	Enc string `json:"enc"`
	// Ciphertext is the sealed text with its tag, standard base64.
	Ciphertext string `json:"ciphertext"`
}

// PlainSecret is text as a producer writes it before sealing it (admintrust.SealPayload seals
// every plain Secret of a payload).
func PlainSecret(text string) Secret { return Secret{plain: text, isPlain: true} }

// SealedSecretOf is s as a Secret.
func SealedSecretOf(s SealedSecret) Secret { return Secret{sealed: &s} }

// RedactedSecret is the redaction marker.
func RedactedSecret() Secret { return Secret{redacted: true} }

// Plain returns the text of a plain Secret; false for a sealed, redacted or absent one.
func (s Secret) Plain() (string, bool) { return s.plain, s.isPlain }

// Sealed returns the sealed form; false for a plain, redacted or absent Secret.
func (s Secret) Sealed() (SealedSecret, bool) {
	if s.sealed == nil {
		return SealedSecret{}, false
	}
	return *s.sealed, true
}

// Redacted reports whether s is the redaction marker: its text is gone for good.
func (s Secret) Redacted() bool { return s.redacted }

// IsZero reports whether s is absent.
func (s Secret) IsZero() bool { return !s.isPlain && s.sealed == nil && !s.redacted }

// String hides the secret.
func (s Secret) String() string { return "[secret]" }

// GoString hides the secret.
func (s Secret) GoString() string { return "[secret]" }

// LogValue hides the secret from log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue("[secret]") }

var redactedMarker = []byte(`{"redacted":true}`)

// MarshalJSON writes the wire form: the sealed object, the redaction marker, the plain text as a
// string, or null.
func (s Secret) MarshalJSON() ([]byte, error) {
	switch {
	case s.sealed != nil:
		return json.Marshal(s.sealed)
	case s.redacted:
		return append([]byte(nil), redactedMarker...), nil
	case s.isPlain:
		return json.Marshal(s.plain)
	}
	return []byte("null"), nil
}

// UnmarshalJSON reads any wire form. An object must be the redaction marker or a SealedSecret
// with every field set and nothing else; anything else fails with a *ValidationError (reason
// bad_format) that never repeats the value.
func (s *Secret) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*s = Secret{}
	switch {
	case string(b) == "null":
		return nil
	case len(b) > 0 && b[0] == '"':
		var text string
		if err := json.Unmarshal(b, &text); err != nil {
			return &ValidationError{Field: "secret", Reason: "bad_format", Detail: "not a JSON string"}
		}
		*s = PlainSecret(text)
		return nil
	case len(b) > 0 && b[0] == '{':
		var marker struct {
			Redacted bool `json:"redacted"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if dec.Decode(&marker) == nil && marker.Redacted {
			*s = RedactedSecret()
			return nil
		}
		var sealed SealedSecret
		dec = json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sealed); err != nil || sealed.Sealed == "" || sealed.KeyID == "" || sealed.Enc == "" || sealed.Ciphertext == "" {
			return &ValidationError{Field: "secret", Reason: "bad_format",
				Detail: "a sealed secret {sealed, key_id, enc, ciphertext} or a string"}
		}
		*s = SealedSecretOf(sealed)
		return nil
	}
	return &ValidationError{Field: "secret", Reason: "bad_format", Detail: "a sealed secret {sealed, key_id, enc, ciphertext} or a string"}
}

// SecretKind is the wire form of one secret field of a payload, as SecretFieldKinds finds it.
type SecretKind int

// The wire forms of a secret field.
const (
	SecretAbsent   SecretKind = iota // not in the payload, or null
	SecretPlain                      // a JSON string
	SecretSealed                     // an object other than the redaction marker
	SecretRedacted                   // the redaction marker
	SecretOther                      // anything else (the payload's decoding refuses it)
)

var secretType = reflect.TypeFor[Secret]()

// secretFieldsOf lists the JSON names of the fields of payload type t (a struct or a pointer to
// one) whose type is Secret. Secret fields are top-level fields of a payload.
func secretFieldsOf(t reflect.Type) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Type != secretType {
			if hasSecret(f.Type, 0) {
				panic(fmt.Sprintf("domain: %s.%s holds a Secret below the top level of a payload; secret fields must be top-level", t.Name(), f.Name))
			}
			continue
		}
		name, _, _ := cutTag(f.Tag.Get("json"))
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// hasSecret reports whether t holds a Secret anywhere inside it.
func hasSecret(t reflect.Type, depth int) bool {
	if t == secretType {
		return true
	}
	if depth > 8 {
		return false
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return hasSecret(t.Elem(), depth+1)
	case reflect.Struct:
		for i := range t.NumField() {
			if hasSecret(t.Field(i).Type, depth+1) {
				return true
			}
		}
	}
	return false
}

func cutTag(tag string) (name, opts string, ok bool) {
	for i := 0; i < len(tag); i++ {
		if tag[i] == ',' {
			return tag[:i], tag[i+1:], true
		}
	}
	return tag, "", false
}

// SecretFields lists the JSON names of the command's secret fields (payload fields of type
// Secret), in field order; nil when it has none.
func (i AdminCommandInfo) SecretFields() []string { return i.secrets }

// SecretFieldKinds reports the wire form of each secret field of payload, a JSON object. Keys
// are matched as encoding/json matches them to the field, case-insensitively: of several keys
// that name one field, a plain one wins, then one of another form, then the marker. It fails
// when payload is not a JSON object.
func (i AdminCommandInfo) SecretFieldKinds(payload json.RawMessage) (map[string]SecretKind, error) {
	if len(i.secrets) == 0 {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil {
		return nil, errors.New("the payload is not a JSON object")
	}
	// rank orders the kinds by how much they say about a field named more than once.
	rank := map[SecretKind]int{SecretAbsent: 0, SecretSealed: 1, SecretRedacted: 2, SecretOther: 3, SecretPlain: 4}
	out := make(map[string]SecretKind, len(i.secrets))
	for _, name := range i.secrets {
		out[name] = SecretAbsent
		for key, v := range fields {
			if !strings.EqualFold(key, name) {
				continue
			}
			if k := secretKindOf(v); rank[k] > rank[out[name]] {
				out[name] = k
			}
		}
	}
	return out, nil
}

func secretKindOf(v json.RawMessage) SecretKind {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0 || string(v) == "null":
		return SecretAbsent
	case v[0] == '"':
		return SecretPlain
	case v[0] == '{':
		var s Secret
		if s.UnmarshalJSON(v) == nil && s.Redacted() {
			return SecretRedacted
		}
		return SecretSealed
	}
	return SecretOther
}

// Redact returns payload with every secret field of the command that is present replaced by the
// redaction marker {"redacted": true}, sealed ones included (a ciphertext under a key the node
// holds is not redacted); changed says whether anything was replaced. A payload of a command with
// secret fields that is not a JSON object is replaced whole by the marker. Keys are matched
// case-insensitively, as encoding/json matches them to the field. A command without secret
// fields gets payload back as it is.
func (i AdminCommandInfo) Redact(payload json.RawMessage) (out json.RawMessage, changed bool) {
	if len(i.secrets) == 0 {
		return payload, false
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil || fields == nil {
		return append(json.RawMessage(nil), redactedMarker...), true
	}
	for key, v := range fields {
		for _, name := range i.secrets {
			// encoding/json gives a field any key that matches its name case-insensitively.
			if strings.EqualFold(key, name) && secretKindOf(v) != SecretAbsent && secretKindOf(v) != SecretRedacted {
				fields[key] = append(json.RawMessage(nil), redactedMarker...)
				changed = true
			}
		}
	}
	if !changed {
		return payload, false
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return append(json.RawMessage(nil), redactedMarker...), true
	}
	return b, true
}
