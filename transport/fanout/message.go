package fanout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
)

// Kind is what a Message carries.
type Kind string

// The kinds of messages.
const (
	// KindData is a committed message: the fields of a WebSocket data frame.
	KindData Kind = "data"
	// KindInfo is an ephemeral note about a topic (typing "kp", "read", "recv"); never stored.
	KindInfo Kind = "info"
	// KindPres is a presence change in a topic ("on", "off") of user From.
	KindPres Kind = "pres"
	// KindControl is a committed change of a topic's members or settings (a removal, a role, a
	// block): every session of the topic hears What about user Src, and the subscriptions Drop
	// names end on every node that receives it; one that ends subscriptions goes to every node.
	// Nodes that do not know the kind ignore it.
	KindControl Kind = "control"
	// KindAccount is a committed change of an account or a tenant (a ban, a revocation, a
	// suspension) or a tenant-wide broadcast, sent to every node with Fanout.Broadcast: each
	// node updates its guard and tenant cache from Account and ends or tells the sessions it
	// concerns. It has no topic.
	KindAccount Kind = "account"
	// KindChange is a committed change of message Seq by user From: What is "recall" or "edit";
	// an edit carries the content Version after it and the new Content. Nodes that do not know
	// the kind ignore it.
	KindChange Kind = "change"
	// KindUser is an item of user To's per-user channel (the WebSocket "me" topic), sent with
	// Fanout.PublishNodes to the nodes with a channel session of the user: Content is the item as
	// its frame carries it, What its kind, Src whom it concerns and Topic, when set, the
	// conversation it concerns (a node starts or stops routing that conversation's messages to
	// the user's channel sessions by them). Nodes that do not know the kind ignore it.
	KindUser Kind = "user"
)

// AccountControl is the body of a KindAccount message.
type AccountControl struct {
	// What happened: an account change ("banned", "unbanned", "kicked", "tokens_revoked",
	// "password_reset"), a tenant change ("tenant_changed") or "broadcast".
	What string `json:"what"`
	// User is the account concerned; 0 for a tenant change or broadcast.
	User domain.UserID `json:"user,omitempty"`
	// Banned and NotBefore are the account's state after the change, Version its account
	// stream version (or the tenant's version for tenant changes).
	Banned    bool      `json:"banned,omitempty"`
	NotBefore time.Time `json:"not_before,omitzero"`
	Version   int64     `json:"version,omitempty,string"`
	// KeptSession and KeptSince are the account's kept login session after a password change
	// (account.Status).
	KeptSession string    `json:"kept_session,omitempty"`
	KeptSince   time.Time `json:"kept_since,omitzero"`
	// EndSessions ends the sessions concerned: for an account, those whose token was issued
	// before EndBefore (every session when it is zero) but the kept session's tokens from
	// KeptSince on; for a tenant, all of them. See Ends.
	EndSessions bool      `json:"end_sessions,omitempty"`
	EndBefore   time.Time `json:"end_before,omitzero"`
	// Session, with What "session_ended", is the login session signed out: only the
	// connections of its tokens end, and every node refuses them until SessionExpires.
	Session        string    `json:"session,omitempty"`
	SessionExpires time.Time `json:"session_expires,omitzero"`
	// Reason is the stable reason the ended sessions are told (user_banned, token_revoked,
	// kicked, tenant_suspended).
	Reason string `json:"reason,omitempty"`
	// Item is the change as an item of the user's channel (its frame body, channel seq
	// included), for the user's channel sessions before any of them ends; empty when it was
	// not logged.
	Item json.RawMessage `json:"item,omitempty"`
	// Status and Settings are the tenant's, for tenant changes.
	Status   string          `json:"status,omitempty"`
	Settings json.RawMessage `json:"settings,omitempty"`
}

// WhatSessionEnded is the AccountControl.What of a login session signed out.
const WhatSessionEnded = "session_ended"

// Ends reports whether an account message that ends sessions (EndSessions) ends a connection of
// the user whose token was issued at issued for login session session ("" for a token without
// one): the connections of Session when one is named, else those whose token predates
// EndBefore (all when it is zero), but the kept session's admitted tokens.
func (a *AccountControl) Ends(issued time.Time, session string) bool {
	switch {
	case !a.EndSessions:
		return false
	case a.Session != "":
		return session == a.Session
	case a.EndBefore.IsZero():
		return true
	}
	return !(domain.TokenCutoff{NotBefore: a.EndBefore, KeptSession: a.KeptSession, KeptSince: a.KeptSince}).Admits(issued, session)
}

// Drop names the subscriptions a KindControl message ends.
type Drop string

// The scopes of a KindControl message.
const (
	// DropNone ends no subscription: the message is a notice.
	DropNone Drop = ""
	// DropUser ends the subscriptions of every session of user Src to the topic.
	DropUser Drop = "user"
	// DropAll ends every subscription to the topic.
	DropAll Drop = "all"
)

// Message is what travels to a topic's online sessions. Receivers must not modify it: one value
// is shared by every local session.
type Message struct {
	Kind   Kind            `json:"kind"`
	Tenant domain.TenantID `json:"tenant"`
	Topic  domain.Topic    `json:"topic,omitzero"` // zero only in a KindAccount or KindUser message
	From   domain.UserID   `json:"from,omitempty"` // 0 only in a control message of an unknown actor
	// Data fields.
	Seq       int64          `json:"seq,omitempty,string"`
	MessageID string         `json:"message_id,omitempty"`
	MsgType   domain.MsgType `json:"msg_type,omitempty"`
	Head      *domain.Head   `json:"head,omitempty"`
	TS        time.Time      `json:"ts"`
	// Content is the message content exactly as the sender sent it (bytes, not re-encoded).
	Content json.RawMessage `json:"-"`
	// What is the note ("kp", "read", "recv"), presence change ("on", "off") or control change
	// ("removed", "role", ...).
	What string `json:"what,omitempty"`
	// Src is the user a KindControl change concerns (the removed member, the blocked peer); 0
	// when it concerns the topic itself. From is who made the change, 0 when unknown.
	Src domain.UserID `json:"src,omitempty"`
	// Drop is whose subscriptions a KindControl message ends.
	Drop Drop `json:"drop,omitempty"`
	// Version is the content version after a KindChange edit.
	Version int64 `json:"version,omitempty,string"`
	// SkipSession, when set, names the session the message came from; it does not receive it.
	SkipSession string `json:"skip_session,omitempty"`
	// To is the user whose channel a KindUser message is for.
	To domain.UserID `json:"to,omitempty"`
	// Account is the body of a KindAccount message.
	Account *AccountControl `json:"account,omitempty"`
	// Origin is the node that broadcast the message; it skips its own copy.
	Origin string `json:"origin,omitempty"`

	// route is the other nodes the sequencer's Router read for the message (see
	// Fanout.QueueRoutes), at routedAt; a zero routedAt for none. Not sent.
	route    []string
	routedAt time.Time
}

// encode writes m as a JSON header, a newline, and the content bytes verbatim. JSON encoding
// would compact and escape the content; this keeps it byte for byte.
func encode(m *Message) ([]byte, error) {
	h, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode fanout message: %w", err)
	}
	out := make([]byte, 0, len(h)+1+len(m.Content))
	out = append(out, h...)
	out = append(out, '\n')
	return append(out, m.Content...), nil
}

// decode reverses encode.
func decode(b []byte) (*Message, error) {
	h, content, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return nil, errors.New("decode fanout message: no header separator")
	}
	m := new(Message)
	if err := json.Unmarshal(h, m); err != nil {
		return nil, fmt.Errorf("decode fanout message: %w", err)
	}
	switch {
	case m.Tenant.IsZero():
		return nil, errors.New("decode fanout message: tenant is required")
	case m.Kind == KindAccount && m.Account == nil:
		return nil, errors.New("decode fanout message: an account message needs its body")
	case m.Kind == KindUser && m.To <= 0:
		return nil, errors.New("decode fanout message: a user message needs its user")
	case m.Kind != KindAccount && m.Kind != KindUser && m.Topic.IsZero():
		return nil, errors.New("decode fanout message: topic is required")
	}
	if len(content) > 0 {
		m.Content = content
	}
	return m, nil
}
