package ws

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/telemetry"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/presence"
	"github.com/imledger/imledger/transport/userchan"
)

// TokenVerifier turns a login token into a principal (transport/auth.Signer implements it).
// Errors wrap auth.ErrTokenInvalid or auth.ErrTokenExpired.
type TokenVerifier interface {
	Verify(token string) (auth.Principal, error)
}

// MessageSender sends a message (message.SendMessageHandler implements it). The gateway does
// not deliver what it sends: the sender delivers each message at its commit (a
// message.CommitListener such as fanout.Commits), once, whatever became of the pub.
type MessageSender interface {
	Handle(ctx context.Context, cmd message.SendMessage) (message.SendResult, error)
}

// ReadMarker records read and receive marks (message.MessageOpsHandler implements it).
type ReadMarker interface {
	MarkRead(ctx context.Context, cmd message.MarkRead) (message.MarkResult, error)
}

// HistoryQuery selects a page of a topic's messages: seqs after AfterSeq and before BeforeSeq
// (0 means unbounded), at most Limit of them.
type HistoryQuery struct {
	AfterSeq  int64
	BeforeSeq int64
	Limit     int
}

// HistoryPage is a page of messages in seq order. LastSeq is the topic's watermark (every seq up
// to it is a message or a final hole; the page holds none above it), so a client knows it caught
// up even across seq holes; HasMore says whether more messages match up to it.
type HistoryPage struct {
	Messages []readmodels.Message
	LastSeq  int64
	HasMore  bool
}

// HistoryReader reads a topic's history as viewer sees it (the readmodels query side).
type HistoryReader interface {
	History(ctx context.Context, tenant domain.TenantID, topic domain.Topic, viewer domain.UserID, q HistoryQuery) (HistoryPage, error)
}

// PresenceStore writes this node's sessions' presence (transport/presence.Store implements it).
type PresenceStore interface {
	Login(ctx context.Context, in presence.LoginInfo) (*presence.Session, error)
}

// Publisher delivers a message to a topic's online sessions on every node
// (transport/fanout.Fanout implements it). Publish must not block.
type Publisher interface {
	Publish(m *fanout.Message)
}

// Policy decides who may subscribe to a topic, who may read it (its history, a read mark in it)
// and who may post to it. A refusal is a *domain.DeniedError, answered 403 with its reason; a
// retryable error is answered 503.
type Policy interface {
	CanSubscribe(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) error
	CanRead(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) error
	CanPublish(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) error
}

// DefaultPolicy lets anyone subscribe and post to a group topic, and only its two parties to a
// 1:1 topic; others are refused with reason "not_member". Group membership checks replace it
// once memberships are queryable.
type DefaultPolicy struct{}

// CanSubscribe implements Policy.
func (DefaultPolicy) CanSubscribe(_ context.Context, _ domain.TenantID, user domain.UserID, topic domain.Topic) error {
	if topic.Kind() == domain.TopicDirect && !topic.Has(user) {
		return domain.Deny(ReasonNotMember)
	}
	return nil
}

// CanRead implements Policy.
func (p DefaultPolicy) CanRead(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) error {
	return p.CanSubscribe(ctx, tenant, user, topic)
}

// CanPublish implements Policy.
func (p DefaultPolicy) CanPublish(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) error {
	return p.CanSubscribe(ctx, tenant, user, topic)
}

// TopicReader answers whether a user may read a topic (transport/rest.ReadPolicy implements it).
type TopicReader interface {
	CanRead(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) error
}

// MemberPolicy is the Policy of a node with memberships: those who may read a topic may
// subscribe to it and read its history, and those the send policy allows may post to it. A user
// the peer blocks may still read the 1:1 topic's history but not subscribe to it: a live
// subscription would deliver the blocker's new messages.
type MemberPolicy struct {
	Read TopicReader
	Send message.SendPolicy
	// SenderChecks says Deps.Sender applies Send itself (message.SendMessageHandler with the same
	// policy): a pub then leaves the check to it, so the send policy is asked once per pub. Other
	// frames that post to a topic (read receipts, typing) are checked here all the same.
	SenderChecks bool
}

var _ Policy = MemberPolicy{}

// CanSubscribe implements Policy.
func (p MemberPolicy) CanSubscribe(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) error {
	if err := p.Read.CanRead(ctx, tenant, user, topic); err != nil {
		return err
	}
	if topic.Kind() == domain.TopicDirect {
		return p.Send.CanSend(ctx, tenant, user, topic)
	}
	return nil
}

// CanRead implements Policy: the read policy alone, as REST reads answer it.
func (p MemberPolicy) CanRead(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) error {
	return p.Read.CanRead(ctx, tenant, user, topic)
}

// checkedBySender is a Policy whose publish check the send handler makes again.
type checkedBySender interface{ pubCheckedBySender() bool }

func (p MemberPolicy) pubCheckedBySender() bool { return p.SenderChecks }

// CanPublish implements Policy.
func (p MemberPolicy) CanPublish(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) error {
	return p.Send.CanSend(ctx, tenant, user, topic)
}

// SessionRecorder appends session.opened.v1 / session.closed.v1 events so analysts can replay
// presence (session.Recorder implements it). Calls only queue the event.
type SessionRecorder interface {
	Opened(ctx context.Context, tenant domain.TenantID, user domain.UserID, sessionID, userAgent string) error
	Closed(ctx context.Context, tenant domain.TenantID, user domain.UserID, sessionID, reason string) error
}

// ChannelLog reads the users' channel logs (*userchan.Log implements it).
type ChannelLog interface {
	Read(ctx context.Context, tenant domain.TenantID, user domain.UserID, epoch string, after int64, limit int) (userchan.Page, error)
	Tail(ctx context.Context, tenant domain.TenantID, user domain.UserID, n int) ([]userchan.Entry, error)
}

// ChannelState is what a session on its user's channel starts from (the business read model
// implements it): the groups the user is a member of, whose messages reach the channel, and the
// users who block the user, whose 1:1 messages do not. Its answers may trail the last changes;
// the channel log holds those.
type ChannelState interface {
	UserGroups(ctx context.Context, tenant domain.TenantID, user domain.UserID) ([]domain.GroupID, error)
	BlockedBy(ctx context.Context, tenant domain.TenantID, user domain.UserID) ([]domain.UserID, error)
}

// RateLimiter counts a request against a rate limit (*ratelimit.Limiter): nil, a
// *domain.RateLimitedError, or a retryable error when Redis does not answer (fail closed).
type RateLimiter interface {
	Allow(ctx context.Context, tenant domain.TenantID, kind domain.RateLimitKind, subject string) error
}

// Deps are the collaborators of a Gateway.
type Deps struct {
	Tokens  TokenVerifier // required
	Sender  MessageSender // required
	Marks   ReadMarker    // optional: without it read/recv notes are answered 501
	History HistoryReader // optional: without it get is answered 501
	// Presence records sessions and topic members in Redis. Optional: without it nothing is
	// written and other nodes never learn about this node's sessions.
	Presence PresenceStore
	// Sessions records each logged-in session's opening and close as events. Optional.
	Sessions SessionRecorder
	// Hub is this node's topic registry. Default: a new Hub. Pass the Hub given to fanout.New
	// as its Local deliverer.
	Hub *Hub
	// Publisher delivers notes (typing, receipts) and presence changes to every node. Default:
	// the Hub alone (a single node). Messages are delivered by the Sender's commit listener.
	Publisher Publisher
	Policy    Policy // default DefaultPolicy
	// Gate checks the principal at login and before every frame, and gives the tenant's content
	// limit. Optional: without it every verified token is admitted.
	Gate Gate
	// Channel serves the per-user channel ("me"): its log, and with ChannelState what a session
	// on it starts from. Optional: without both, a sub or get of "me" is answered 501.
	Channel      ChannelLog
	ChannelState ChannelState
	// Limiter limits WebSocket connects per client address (ratelimit.Limiter, kind
	// ws_connect_ip, node-wide). Optional. Pubs are limited by the Sender given
	// (ratelimit.LimitSends) and refused with ctrl 429 rate_limited.
	Limiter    RateLimiter
	Logger     *slog.Logger          // default discards
	Registerer prometheus.Registerer // optional
	// Panics counts the panics sessions recover from (imledger_panics_total{component="ws"}).
	// Default: the counter registered on Registerer, shared with other components given it.
	Panics *telemetry.Panics
}
