package domain

import (
	"strconv"
	"strings"
)

// TenantID names a tenant: 1 to 32 characters of lower-case ASCII letters, digits and '_',
// starting with a letter or digit. The alphabet is safe inside database names and Redis keys.
type TenantID struct{ v string }

// validTenantID reports whether s matches ^[a-z0-9][a-z0-9_]{0,31}$ (a loop: every envelope a
// projector decodes names its tenant, and a regular expression cost more than the rest of the
// envelope's fields).
func validTenantID(s string) bool {
	if len(s) == 0 || len(s) > 32 || s[0] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// NewTenantID validates s.
func NewTenantID(s string) (TenantID, error) {
	if s == "" {
		return TenantID{}, invalid("tenant_id", "required", "")
	}
	if !validTenantID(s) {
		return TenantID{}, invalid("tenant_id", "bad_format", "1-32 of [a-z0-9_], starting with [a-z0-9]")
	}
	return TenantID{v: s}, nil
}

// MustTenantID is NewTenantID for constants and tests; it panics on bad input.
func MustTenantID(s string) TenantID {
	t, err := NewTenantID(s)
	if err != nil {
		panic(err)
	}
	return t
}

// String returns the tenant id.
func (t TenantID) String() string { return t.v }

// IsZero reports whether t is unset.
func (t TenantID) IsZero() bool { return t.v == "" }

// MarshalText implements encoding.TextMarshaler.
func (t TenantID) MarshalText() ([]byte, error) { return []byte(t.v), nil }

// UnmarshalText validates the tenant id.
func (t *TenantID) UnmarshalText(b []byte) error {
	v, err := NewTenantID(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// UserID is a positive 64-bit user id. Its text form is the decimal number; "usr" + decimal is
// accepted on input. In JSON it is a string.
type UserID int64

// ParseUserID parses "123" or "usr123".
func ParseUserID(s string) (UserID, error) {
	if s == "" {
		return 0, invalid("user_id", "required", "")
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(s, "usr"), 10, 64)
	if err != nil || n <= 0 {
		return 0, invalid("user_id", "bad_format", "a positive 64-bit decimal number")
	}
	return UserID(n), nil
}

// NewUserID validates n.
func NewUserID(n int64) (UserID, error) {
	if n <= 0 {
		return 0, invalid("user_id", "bad_format", "a positive 64-bit number")
	}
	return UserID(n), nil
}

// String returns the decimal form.
func (u UserID) String() string { return strconv.FormatInt(int64(u), 10) }

// Int64 returns u as int64.
func (u UserID) Int64() int64 { return int64(u) }

// MarshalText implements encoding.TextMarshaler, so JSON carries a string.
func (u UserID) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalText accepts "123" or "usr123".
func (u *UserID) UnmarshalText(b []byte) error {
	v, err := ParseUserID(string(b))
	if err != nil {
		return err
	}
	*u = v
	return nil
}
