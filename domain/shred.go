package domain

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Crypto-shredding (DESIGN §7a). Personal content inside events — message content, profile
// fields, file names — is stored as a sealed value: a JSON string
//
//	"$enc:v1:<kind>:<user>:<month>:<nonce>:<ciphertext>"
//
// in place of the plaintext JSON value. kind is SealContent (the plaintext is any JSON value:
// message content) or SealText (the plaintext is a JSON string: a nickname); user and month
// ("YYYY-MM") name the author's data key; nonce and ciphertext are AES-256-GCM output in
// unpadded base64url, so the token needs no JSON escaping and fits wherever the plaintext did
// (a string field or a json.RawMessage). The ciphertext is the plaintext's JSON encoding.
// Routing fields (tenant, stream, seq, type, times) are never sealed.
//
// A reader opens a payload with OpenPayload: each sealed value becomes its plaintext when the
// key exists, or the erased marker of its kind when the key was destroyed (ErasedContent,
// ErasedText). A missing key is never an error.

// SealPrefix begins every sealed value.
const SealPrefix = "$enc:v1:"

// SealKind says what a sealed value held, and so what a reader sees once its key is gone.
type SealKind byte

// The seal kinds.
const (
	// SealContent is any JSON value (message content); erased it reads ErasedContent.
	SealContent SealKind = 'j'
	// SealText is a JSON string (nickname, avatar, signature, file name); erased it reads "".
	SealText SealKind = 's'
)

// ErasedContent is what every reader sees in place of content whose data key was destroyed.
var ErasedContent = json.RawMessage(`{"$erased":true}`)

// ErasedText is what every reader sees in place of a text field whose data key was destroyed.
const ErasedText = ""

// ErrKeyErased is the error of an Opener asked for a data key that was destroyed (erasure or
// retention) or never existed: the value it sealed is gone for good.
var ErrKeyErased = errors.New("data key erased")

// ErrSealBroken is the error of an Opener given a sealed value its key does not authenticate
// (tampered or forged): it is read as erased, never as plaintext.
var ErrSealBroken = errors.New("sealed value does not authenticate")

// DataKeyRef names one data key: the author's key of one month of a tenant.
type DataKeyRef struct {
	User  UserID
	Month string // "YYYY-MM", UTC
}

// String returns "<user>/<month>".
func (k DataKeyRef) String() string { return k.User.String() + "/" + k.Month }

// KeyMonth returns the month of t as a data key names it: "YYYY-MM" in UTC.
func KeyMonth(t time.Time) string { return t.UTC().Format("2006-01") }

// Sealed is a parsed sealed value.
type Sealed struct {
	Kind       SealKind
	Key        DataKeyRef
	Nonce      []byte
	Ciphertext []byte
}

var b64 = base64.RawURLEncoding

// String returns the token (without JSON quotes).
func (s Sealed) String() string {
	var b strings.Builder
	b.Grow(len(SealPrefix) + 32 + b64.EncodedLen(len(s.Nonce)) + b64.EncodedLen(len(s.Ciphertext)))
	b.WriteString(SealPrefix)
	b.WriteByte(byte(s.Kind))
	b.WriteByte(':')
	b.WriteString(s.Key.User.String())
	b.WriteByte(':')
	b.WriteString(s.Key.Month)
	b.WriteByte(':')
	b.WriteString(b64.EncodeToString(s.Nonce))
	b.WriteByte(':')
	b.WriteString(b64.EncodeToString(s.Ciphertext))
	return b.String()
}

// AAD returns the additional data a seal authenticates: tenant, key and kind, so a value copied
// to another tenant, author, month or field kind does not open.
func (s Sealed) AAD(tenant TenantID) []byte {
	return []byte("imledger/seal/v1/" + tenant.String() + "/" + s.Key.String() + "/" + string(s.Kind))
}

// IsSealed reports whether s is a sealed value's token.
func IsSealed(s string) bool { return strings.HasPrefix(s, SealPrefix) }

// ParseSealed parses a token; ok is false for anything that is not a well-formed sealed value.
func ParseSealed(tok string) (Sealed, bool) {
	rest, ok := strings.CutPrefix(tok, SealPrefix)
	if !ok {
		return Sealed{}, false
	}
	// Four cuts rather than strings.Split, and a month checked by hand rather than by
	// time.Parse: every sealed value a projection or a rebuild reads passes here.
	var parts [5]string
	for i := range 4 {
		var found bool
		if parts[i], rest, found = strings.Cut(rest, ":"); !found {
			return Sealed{}, false
		}
	}
	if strings.IndexByte(rest, ':') >= 0 || len(parts[0]) != 1 {
		return Sealed{}, false
	}
	parts[4] = rest
	kind := SealKind(parts[0][0])
	if kind != SealContent && kind != SealText {
		return Sealed{}, false
	}
	user, err := ParseUserID(parts[1])
	if err != nil {
		return Sealed{}, false
	}
	if !isKeyMonth(parts[2]) {
		return Sealed{}, false
	}
	nonce, err1 := b64.DecodeString(parts[3])
	ct, err2 := b64.DecodeString(parts[4])
	if err1 != nil || err2 != nil {
		return Sealed{}, false
	}
	return Sealed{Kind: kind, Key: DataKeyRef{User: user, Month: parts[2]}, Nonce: nonce, Ciphertext: ct}, true
}

// isKeyMonth reports whether m is "YYYY-MM" with a month from 01 to 12, as KeyMonth writes it.
func isKeyMonth(m string) bool {
	if len(m) != 7 || m[4] != '-' {
		return false
	}
	for i, c := range []byte(m) {
		if i != 4 && (c < '0' || c > '9') {
			return false
		}
	}
	month := int(m[5]-'0')*10 + int(m[6]-'0')
	return month >= 1 && month <= 12
}

// Sealer seals personal content under its author's data key of the month of at, creating the
// key on first use. It returns the token (see Sealed.String). plain is the value's JSON
// encoding. It fails with ErrKeyErased when the author's keys were destroyed (an erased user
// writes nothing more) and with a wrapped error when the key store or keeper failed.
type Sealer interface {
	Seal(ctx context.Context, tenant TenantID, author UserID, at time.Time, kind SealKind, plain []byte) (string, error)
}

// Opener opens sealed values: it returns the plaintext JSON, ErrKeyErased when the key is gone,
// ErrSealBroken when the value does not authenticate, and any other error (key store down, keeper
// refusing) for a failure a retry may cure.
type Opener interface {
	Open(ctx context.Context, tenant TenantID, s Sealed) ([]byte, error)
}

var sealMark = []byte(`"` + SealPrefix)

// HasSealed reports whether payload holds a sealed value; it is one byte search.
func HasSealed(payload []byte) bool { return bytes.Contains(payload, sealMark) }

// OpenPayload returns payload with every sealed value replaced by its plaintext JSON, or by the
// erased marker of its kind when o reports the key erased or the value broken. A payload
// without sealed values is returned as it is, without a copy. It fails only when o fails
// otherwise (a retry may cure it); o nil leaves the payload as it is.
func OpenPayload(ctx context.Context, tenant TenantID, payload []byte, o Opener) ([]byte, error) {
	if o == nil || !HasSealed(payload) {
		return payload, nil
	}
	out := make([]byte, 0, len(payload))
	rest := payload
	for {
		i := bytes.Index(rest, sealMark)
		if i < 0 {
			return append(out, rest...), nil
		}
		end := bytes.IndexByte(rest[i+1:], '"')
		if (i > 0 && rest[i-1] == '\\') || end < 0 {
			// Inside a string (an escaped quote) or unterminated: not a sealed value.
			out = append(out, rest[:i+1]...)
			rest = rest[i+1:]
			continue
		}
		tok := string(rest[i+1 : i+1+end])
		s, ok := ParseSealed(tok)
		if !ok {
			out = append(out, rest[:i+2+end]...)
			rest = rest[i+2+end:]
			continue
		}
		plain, err := openOne(ctx, tenant, s, o)
		if err != nil {
			return nil, err
		}
		out = append(append(out, rest[:i]...), plain...)
		rest = rest[i+2+end:]
	}
}

// openOne opens s, reading an erased key or a broken value as the erased marker of its kind.
func openOne(ctx context.Context, tenant TenantID, s Sealed, o Opener) ([]byte, error) {
	plain, err := o.Open(ctx, tenant, s)
	switch {
	case errors.Is(err, ErrKeyErased) || errors.Is(err, ErrSealBroken):
		if s.Kind == SealText {
			return []byte(strconv.Quote(ErasedText)), nil
		}
		return ErasedContent, nil
	case err != nil:
		return nil, fmt.Errorf("open %s: %w", s.Key, err)
	case s.Kind == SealText && (len(plain) < 2 || plain[0] != '"'):
		return []byte(strconv.Quote(ErasedText)), nil
	}
	return plain, nil
}

// OpenEnvelope is OpenPayload over env's payload; env is returned as it is when nothing is
// sealed.
func OpenEnvelope(ctx context.Context, env Envelope, o Opener) (Envelope, error) {
	p, err := OpenPayload(ctx, env.TenantID, env.Payload, o)
	if err != nil {
		return env, fmt.Errorf("event %s: %w", env.EventID, err)
	}
	env.Payload = p
	return env, nil
}

// OpenEnvelopes opens every envelope of events in place.
func OpenEnvelopes(ctx context.Context, events []Envelope, o Opener) error {
	if o == nil {
		return nil
	}
	for i := range events {
		e, err := OpenEnvelope(ctx, events[i], o)
		if err != nil {
			return err
		}
		events[i] = e
	}
	return nil
}

// SealString seals a string field of author with s; the empty string and an already sealed value
// are kept as they are (nothing personal to hide, or sealed already).
func SealString(ctx context.Context, s Sealer, tenant TenantID, author UserID, at time.Time, v string) (string, error) {
	if s == nil || v == "" || IsSealed(v) {
		return v, nil
	}
	plain, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("seal text: %w", err)
	}
	return s.Seal(ctx, tenant, author, at, SealText, plain)
}

// SealContentRaw seals message content of author: the token as a JSON string.
func SealContentRaw(ctx context.Context, s Sealer, tenant TenantID, author UserID, at time.Time, raw json.RawMessage) (json.RawMessage, error) {
	if s == nil || len(raw) == 0 {
		return raw, nil
	}
	tok, err := s.Seal(ctx, tenant, author, at, SealContent, raw)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(strconv.Quote(tok)), nil
}

// SealPersonal returns events with the personal fields of their payloads sealed through s:
// the nickname, avatar and signature of user.profile_updated.v1 (author: the user) and the name
// of file.created.v1 (author: the uploader). Payloads are replaced by sealed copies, so the
// caller's decision keeps its plaintext; events without personal fields are kept as they are.
// s nil returns events unchanged. Errors are the Sealer's.
func SealPersonal(ctx context.Context, s Sealer, tenant TenantID, events []PendingEvent) ([]PendingEvent, error) {
	if s == nil {
		return events, nil
	}
	out := make([]PendingEvent, len(events))
	copy(out, events)
	for i := range out {
		var err error
		switch p := out[i].Payload.(type) {
		case *UserProfileUpdated:
			cp := *p
			err = sealStrings(ctx, s, tenant, cp.User, cp.UpdatedAt, &cp.Nickname, &cp.Avatar, &cp.Signature)
			out[i].Payload = &cp
		case *FileCreated:
			cp := *p
			err = sealStrings(ctx, s, tenant, cp.Uploader, cp.CreatedAt, &cp.Name)
			out[i].Payload = &cp
		}
		if err != nil {
			return nil, fmt.Errorf("seal %s: %w", out[i].Type, err)
		}
	}
	return out, nil
}

// sealStrings seals each field in place with SealString.
func sealStrings(ctx context.Context, s Sealer, tenant TenantID, author UserID, at time.Time, fields ...*string) error {
	for _, f := range fields {
		v, err := SealString(ctx, s, tenant, author, at, *f)
		if err != nil {
			return err
		}
		*f = v
	}
	return nil
}
