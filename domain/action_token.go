package domain

import "time"

// Action token event types (Category audit, topic im.audit.event): the life of a one-time token
// for a sensitive action (commands/actiontoken). Each token has a stream of its own,
// ActionTokenStreamID: issued is version 1; consumed, revoked and unconsumed follow, and the
// stream's expected version decides which of concurrent consumers wins. The events carry the
// token's SHA-256, never the token.
const (
	EventActionTokenIssued     EventType = "action_token.issued.v1"
	EventActionTokenConsumed   EventType = "action_token.consumed.v1"
	EventActionTokenRevoked    EventType = "action_token.revoked.v1"
	EventActionTokenUnconsumed EventType = "action_token.unconsumed.v1"
)

// BizTypeActionToken is the biz_type of action token events.
const BizTypeActionToken = "action_token"

// ActionTokenStreamID is the stream of the token whose id is tokenID.
func ActionTokenStreamID(tokenID string) string { return "atoken:" + tokenID }

// ActionTokenIssued is the payload of action_token.issued.v1.
type ActionTokenIssued struct {
	TokenID     string    `json:"token_id"`
	Action      string    `json:"action"`               // reset_password, join_group
	Subject     string    `json:"subject"`              // what the action applies to: a group topic, a user id, ...
	CreatedBy   UserID    `json:"created_by,omitempty"` // absent for the system
	TokenSHA256 string    `json:"token_sha256"`         // hex
	IssuedAt    time.Time `json:"issued_at"`
	ExpiresAt   time.Time `json:"expires_at"`
}

// ActionTokenConsumed is the payload of action_token.consumed.v1: By spent the token.
type ActionTokenConsumed struct {
	TokenID    string    `json:"token_id"`
	By         UserID    `json:"by,omitempty"` // absent when no user is named
	ConsumedAt time.Time `json:"consumed_at"`
}

// ActionTokenRevoked is the payload of action_token.revoked.v1. Reason is "revoked" for a
// revocation and "not_cached" for a token whose issue failed after it was recorded (the hot cache
// was unreachable), which was never shown to anyone.
type ActionTokenRevoked struct {
	TokenID   string    `json:"token_id"`
	Reason    string    `json:"reason"`
	RevokedAt time.Time `json:"revoked_at"`
}

// ActionTokenUnconsumed is the payload of action_token.unconsumed.v1: the consumer By gave the
// token back because what it was spent on did not happen (a join on an invite link refused when
// it was written); the token is active again until it expires.
type ActionTokenUnconsumed struct {
	TokenID      string    `json:"token_id"`
	By           UserID    `json:"by,omitempty"`
	UnconsumedAt time.Time `json:"unconsumed_at"`
}
