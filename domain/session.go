package domain

import "time"

// Session event types: a realtime connection that logged in, and its end. They are published on
// the session category (im.session.event) so analysts can replay presence.
const (
	EventSessionOpened EventType = "session.opened.v1"
	EventSessionClosed EventType = "session.closed.v1"
)

// SessionStreamID is the stream of one session: version 1 is its opening, version 2 its close.
// Its ConversationKey is the user's stream id ("user:<uid>"), so all of one user's session events
// stay in order on one Kafka partition.
func SessionStreamID(user UserID, sessionID string) string {
	return ProfileStreamID(user) + "/session/" + sessionID
}

// SessionOpened is the payload of session.opened.v1.
type SessionOpened struct {
	User      UserID    `json:"user"`
	SessionID string    `json:"session_id"`
	Node      string    `json:"node"`
	UserAgent string    `json:"user_agent,omitempty"`
	OpenedAt  time.Time `json:"opened_at"`
}

// SessionClosed is the payload of session.closed.v1. Reason is the close cause, e.g.
// "client_closed", "idle_timeout", "slow_consumer", "shutdown".
type SessionClosed struct {
	User      UserID    `json:"user"`
	SessionID string    `json:"session_id"`
	Node      string    `json:"node"`
	Reason    string    `json:"reason,omitempty"`
	ClosedAt  time.Time `json:"closed_at"`
}
