package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
)

// Tenants is the tenant registry the tenant commands change (*tenant.Registry).
type Tenants interface {
	Provision(ctx context.Context, t domain.TenantID, settings map[string]json.RawMessage, meta tenant.Meta) (tenant.Result, error)
	Suspend(ctx context.Context, t domain.TenantID, reason string, meta tenant.Meta) (tenant.Result, error)
	Resume(ctx context.Context, t domain.TenantID, meta tenant.Meta) (tenant.Result, error)
	SetConfig(ctx context.Context, t domain.TenantID, changes map[string]json.RawMessage, meta tenant.Meta) (tenant.Result, error)
}

// TenantLookup answers whether a tenant exists (*tenant.Cache); a missing one is a
// *domain.DeniedError tenant_not_found.
type TenantLookup interface {
	Lookup(ctx context.Context, t domain.TenantID) (tenant.Info, error)
}

// Accounts is account governance (*account.Governance).
type Accounts interface {
	Ban(ctx context.Context, t domain.TenantID, u domain.UserID, reason string, meta account.Meta) (account.GovernanceResult, error)
	Unban(ctx context.Context, t domain.TenantID, u domain.UserID, reason string, meta account.Meta) (account.GovernanceResult, error)
	Kick(ctx context.Context, t domain.TenantID, u domain.UserID, reason string, meta account.Meta) (account.GovernanceResult, error)
	RevokeTokens(ctx context.Context, t domain.TenantID, u domain.UserID, reason string, meta account.Meta) (account.GovernanceResult, error)
	ResetPassword(ctx context.Context, t domain.TenantID, u domain.UserID, password string, meta account.Meta) (account.GovernanceResult, error)
	Erase(ctx context.Context, t domain.TenantID, u domain.UserID, meta account.Meta) (account.GovernanceResult, error)
}

// GroupStates reads a group's current state (*group.Loader; maxAge 0 reads the store).
type GroupStates interface {
	Group(ctx context.Context, t domain.TenantID, id domain.GroupID, maxAge time.Duration) (domain.GroupState, error)
}

// MessageModerator recalls messages by moderation (*message.MessageOpsHandler).
type MessageModerator interface {
	RecallByModerator(ctx context.Context, cmd message.ModerationRecall) (message.RecallResult, error)
}

// Sender sends a message and delivers it to the topic's online sessions once committed (the
// send handler with the realtime fanout, as REST sends).
type Sender interface {
	Handle(ctx context.Context, cmd message.SendMessage) (message.SendResult, error)
}

// Broadcaster delivers a system message to every online session of a tenant on every node. It is
// best effort: sessions that are offline do not get it.
type Broadcaster interface {
	BroadcastTenant(ctx context.Context, t domain.TenantID, content json.RawMessage, sentAt time.Time) error
}

// EventAppender is the event store (*eventstore.Store): it appends the tenant broadcasts to their
// own stream and finds the events an earlier run of a command committed.
type EventAppender interface {
	LastVersion(ctx context.Context, t domain.TenantID, streamID string) (int64, error)
	Append(ctx context.Context, t domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope) ([]domain.Envelope, error)
	// FindCaused reports whether t has an event whose causation_id is causationID.
	FindCaused(ctx context.Context, t domain.TenantID, causationID string) (bool, error)
}

// Handlers are the command side the admin commands run through: the same handlers REST and the
// operator commands use. Every field is required.
type Handlers struct {
	Tenants     Tenants
	Lookup      TenantLookup
	Accounts    Accounts
	Groups      *group.Handlers
	GroupStates GroupStates
	Messages    MessageModerator
	Sender      Sender
	Broadcaster Broadcaster
	Events      EventAppender
	// MaxContentBytes is the node's content limit for broadcasts (send.max_content_bytes).
	// Default domain.DefaultMaxContentBytes.
	MaxContentBytes int
}

// run is one command ready to run: its checked envelope, decoded payload and the metadata its
// events carry.
type run struct {
	checked
	payload any
}

// actor is the events' actor: the identity of the key the command was verified with, with the
// key's id (the envelope's administrator for an unsigned command the consumer accepts).
func (r run) actor() domain.Actor { return r.Actor }

func (r run) causation() string { return r.EventID.String() }

// dispatcher maps command types to the functions that run them; each returns the result's data.
type dispatcher struct {
	h       Handlers
	log     *slog.Logger
	secrets secrets
	funcs   map[domain.AdminCommandType]func(context.Context, run) (any, error)
}

func newDispatcher(h Handlers, log *slog.Logger, s secrets) *dispatcher {
	if h.MaxContentBytes <= 0 {
		h.MaxContentBytes = domain.DefaultMaxContentBytes
	}
	d := &dispatcher{h: h, log: log, secrets: s}
	d.funcs = map[domain.AdminCommandType]func(context.Context, run) (any, error){
		domain.CmdTenantProvision:   d.tenantProvision,
		domain.CmdTenantSuspend:     d.tenantSuspend,
		domain.CmdTenantResume:      d.tenantResume,
		domain.CmdTenantConfigSet:   d.tenantConfigSet,
		domain.CmdUserBan:           d.userBan,
		domain.CmdUserUnban:         d.userUnban,
		domain.CmdUserKick:          d.userKick,
		domain.CmdUserRevokeTokens:  d.userRevokeTokens,
		domain.CmdUserErase:         d.userErase,
		domain.CmdUserResetPassword: d.userResetPassword,
		domain.CmdGroupDissolve:     d.groupDissolve,
		domain.CmdGroupMuteAll:      d.groupMuteAll,
		domain.CmdGroupRemoveMember: d.groupRemoveMember,
		domain.CmdGroupTransfer:     d.groupTransfer,
		domain.CmdGroupAnnounce:     d.groupAnnounce,
		domain.CmdMessageRecall:     d.messageRecall,
		domain.CmdMessageBroadcast:  d.messageBroadcast,
	}
	return d
}

// dispatch runs r and returns its result's data.
func (d *dispatcher) dispatch(ctx context.Context, r run) (any, error) {
	fn, ok := d.funcs[r.info.Type]
	if !ok {
		return nil, reject(ReasonUnknownCommand, string(r.info.Type), nil)
	}
	return fn(ctx, r)
}

// required refuses a missing id in field.
func required[T ~int64](field string, v T) error {
	if v <= 0 {
		return &domain.ValidationError{Field: field, Reason: "required"}
	}
	return nil
}
