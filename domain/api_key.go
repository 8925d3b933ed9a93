package domain

import (
	"regexp"
	"time"
)

// Tenant API key event types (Category config, topic im.config.event): a key created for a
// tenant and its revocation. Each key has a stream of its own, APIKeyStreamID. The events carry
// the key's id and its SHA-256, never the key: the key is shown once, to whoever created it.
const (
	EventTenantAPIKeyCreated EventType = "tenant.api_key_created.v1"
	EventTenantAPIKeyRevoked EventType = "tenant.api_key_revoked.v1"
)

// APIKeyIDLen is the length of an API key id: the first hex digits of the key's SHA-256.
const APIKeyIDLen = 12

var (
	apiKeyIDRe   = regexp.MustCompile(`^[0-9a-f]{12}$`)
	apiKeyHashRe = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ValidAPIKeyID reports whether id is an API key id: 12 lower-case hex digits.
func ValidAPIKeyID(id string) bool { return apiKeyIDRe.MatchString(id) }

// APIKeyStreamID is the stream of the tenant API key whose SHA-256 is sha256Hex (64 lower-case hex
// digits). Its ConversationKey is TenantStreamID, so a tenant's keys keep their order with its
// lifecycle on one Kafka partition.
func APIKeyStreamID(sha256Hex string) string { return TenantStreamID + "/api_key/" + sha256Hex }

// TenantAPIKeyCreated is the payload of tenant.api_key_created.v1.
type TenantAPIKeyCreated struct {
	KeyID     string    `json:"key_id"`     // the first 12 hex digits of KeySHA256
	KeySHA256 string    `json:"key_sha256"` // hex
	CreatedAt time.Time `json:"created_at"`
}

// TenantAPIKeyRevoked is the payload of tenant.api_key_revoked.v1: the key is refused from now on
// (nodes that cached it accept it for up to their cache TTL).
type TenantAPIKeyRevoked struct {
	KeyID     string    `json:"key_id"`
	KeySHA256 string    `json:"key_sha256"`
	RevokedAt time.Time `json:"revoked_at"`
}

// CheckAPIKeyEvent checks that the payload p of an API key event names the stream it is on and
// carries a well-formed hash and id; it returns a *ValidationError otherwise.
func CheckAPIKeyEvent(streamID, keyID, sha256Hex string) error {
	switch {
	case !apiKeyHashRe.MatchString(sha256Hex):
		return invalid("key_sha256", "bad_format", "64 lower-case hex digits")
	case keyID != sha256Hex[:APIKeyIDLen]:
		return invalid("key_id", "bad_format", "the first 12 hex digits of key_sha256")
	case streamID != APIKeyStreamID(sha256Hex):
		return invalid("stream_id", "mismatch", "the stream of the key's hash")
	}
	return nil
}
