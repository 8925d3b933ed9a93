package access

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/userchan"
)

// Broadcaster sends a fanout.KindAccount message to every node (*fanout.Fanout, or for an
// operator command a function over fanout.PublishBroadcast).
type Broadcaster interface {
	Broadcast(ctx context.Context, m *fanout.Message) error
}

// BroadcastFunc adapts a function to a Broadcaster.
type BroadcastFunc func(ctx context.Context, m *fanout.Message) error

// Broadcast calls f.
func (f BroadcastFunc) Broadcast(ctx context.Context, m *fanout.Message) error { return f(ctx, m) }

// Notifier implements account.Notifier and tenant.Notifier: every committed change goes to every
// node as a fanout.KindAccount message, which their Deliverer applies to their guard and tenant
// cache and their gateway turns into ended sessions. It is best effort: a lost message reaches
// a node with its next cache refresh, and sessions are checked against the gate at every frame.
type Notifier struct {
	b       Broadcaster
	log     *slog.Logger
	channel AccountLog // nil: account changes are not logged on users' channels
}

// AccountLog logs an item on a user's channel without delivering it (*userchan.Channel
// implements it): the account change carries it to every node.
type AccountLog interface {
	LogOnly(ctx context.Context, tenant domain.TenantID, user domain.UserID, item userchan.Item) (userchan.Logged, error)
}

var (
	_ account.Notifier        = (*Notifier)(nil)
	_ account.SessionNotifier = (*Notifier)(nil)
	_ tenant.Notifier         = (*Notifier)(nil)
)

// NewNotifier returns a Notifier broadcasting through b; a nil logger discards.
func NewNotifier(b Broadcaster, logger *slog.Logger) *Notifier {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{b: b, log: logger}
}

// WithChannel makes n log every account change on its user's channel first (a "me" item what
// "account"), and send the item with the change, so each node hands it to the user's channel
// sessions before it ends any of them. Call it before n is used. It returns n.
func (n *Notifier) WithChannel(c AccountLog) *Notifier {
	n.channel = c
	return n
}

// endReasons are the reasons a session ending for an account change is told.
var endReasons = map[account.Change]string{
	account.ChangeBanned: domain.ReasonUserBanned,
	// An erased account is refused as a banned one is (user.erased.v1 folds so).
	account.ChangeErased:        domain.ReasonUserBanned,
	account.ChangeKicked:        "kicked",
	account.ChangeTokensRevoked: "token_revoked",
	account.ChangePasswordReset: "token_revoked",
	// A password changed by its user ends the user's other sessions.
	account.ChangePasswordChanged: "token_revoked",
}

// ReasonSessionRevoked is the reason a connection of a login session signed out is told.
const ReasonSessionRevoked = "session_revoked"

// AccountChanged implements account.Notifier. A ban and a kick end every session of the user;
// a revocation and a password reset those whose token predates the new not-before time; a
// password change those too but the sessions of the login session it was made from. With a
// channel (WithChannel) the change is logged on the user's channel first.
func (n *Notifier) AccountChanged(ctx context.Context, st account.Status, change account.Change) {
	a := &fanout.AccountControl{What: string(change), User: st.User, Banned: st.Banned, NotBefore: st.NotBefore,
		KeptSession: st.KeptSession, KeptSince: st.KeptSince, Version: st.Version, EndSessions: change.EndsSessions(),
		Reason: endReasons[change]}
	switch change {
	case account.ChangeTokensRevoked, account.ChangePasswordReset, account.ChangePasswordChanged:
		a.EndBefore = st.NotBefore
	}
	now := time.Now().UTC()
	if n.channel != nil && st.User > 0 {
		logged, err := n.channel.LogOnly(ctx, st.Tenant, st.User, userchan.AccountItem(string(change), a.Reason, now))
		if err != nil {
			n.log.WarnContext(ctx, "account change not logged on the user's channel", "tenant_id", st.Tenant.String(),
				"what", string(change), "err", err)
		} else {
			a.Item = logged.Body
		}
	}
	n.send(ctx, &fanout.Message{Kind: fanout.KindAccount, Tenant: st.Tenant, TS: now, Account: a})
}

// SessionEnded implements account.SessionNotifier: every node refuses the session's tokens and
// ends their connections with reason session_revoked.
func (n *Notifier) SessionEnded(ctx context.Context, t domain.TenantID, user domain.UserID, session string, expires time.Time) {
	a := &fanout.AccountControl{What: fanout.WhatSessionEnded, User: user, Session: session, SessionExpires: expires,
		EndSessions: true, Reason: ReasonSessionRevoked}
	now := time.Now().UTC()
	if n.channel != nil && user > 0 {
		logged, err := n.channel.LogOnly(ctx, t, user, userchan.AccountItem(fanout.WhatSessionEnded, ReasonSessionRevoked, now))
		if err != nil {
			n.log.WarnContext(ctx, "session end not logged on the user's channel", "tenant_id", t.String(), "err", err)
		} else {
			a.Item = logged.Body
		}
	}
	n.send(ctx, &fanout.Message{Kind: fanout.KindAccount, Tenant: t, TS: now, Account: a})
}

// TenantChanged implements tenant.Notifier. A suspension ends every session of the tenant.
func (n *Notifier) TenantChanged(ctx context.Context, info tenant.Info) {
	settings, _ := json.Marshal(info.Settings)
	a := &fanout.AccountControl{What: "tenant_changed", Status: string(info.Status), Settings: settings,
		NotBefore: info.NotBefore, Version: info.Version}
	if !info.Active() {
		a.EndSessions, a.Reason = true, domain.ReasonTenantSuspended
	}
	n.send(ctx, &fanout.Message{Kind: fanout.KindAccount, Tenant: info.Tenant, TS: time.Now().UTC(), Account: a})
}

// BroadcastTenant delivers a system message to every online session of t on every node.
func (n *Notifier) BroadcastTenant(ctx context.Context, t domain.TenantID, content json.RawMessage, sentAt time.Time) error {
	return n.b.Broadcast(ctx, &fanout.Message{Kind: fanout.KindAccount, Tenant: t, TS: sentAt, Content: content,
		Account: &fanout.AccountControl{What: "broadcast"}})
}

func (n *Notifier) send(ctx context.Context, m *fanout.Message) {
	if err := n.b.Broadcast(ctx, m); err != nil {
		n.log.WarnContext(ctx, "account or tenant change not sent to other nodes; they learn it at their next refresh",
			"tenant_id", m.Tenant.String(), "what", m.Account.What, "err", err)
	}
}

// Deliverer is a node's fanout.Deliverer: it applies every KindAccount message to the node's
// guard and tenant cache, then hands every message to next (the gateway's Hub), so a session
// ended by a change and logging in again is checked against the changed state.
type Deliverer struct {
	next     fanout.Deliverer
	tenants  *tenant.Cache
	accounts *account.Guard
}

var _ fanout.Deliverer = (*Deliverer)(nil)

// NewDeliverer returns a Deliverer in front of next.
func NewDeliverer(next fanout.Deliverer, tenants *tenant.Cache, accounts *account.Guard) *Deliverer {
	return &Deliverer{next: next, tenants: tenants, accounts: accounts}
}

// Deliver implements fanout.Deliverer.
func (d *Deliverer) Deliver(m *fanout.Message) {
	if m.Kind == fanout.KindAccount && m.Account != nil {
		d.apply(m.Tenant, m.Account)
	}
	d.next.Deliver(m)
}

func (d *Deliverer) apply(t domain.TenantID, a *fanout.AccountControl) {
	switch {
	case a.What == "broadcast":
	case a.What == "tenant_changed":
		info := tenant.Info{Tenant: t, Status: domain.TenantStatus(a.Status), Version: a.Version, NotBefore: a.NotBefore}
		if len(a.Settings) > 0 && json.Unmarshal(a.Settings, &info.Settings) != nil {
			return
		}
		d.tenants.Apply(info)
	case a.What == fanout.WhatSessionEnded:
		d.accounts.RevokeSession(t, a.User, a.Session, a.SessionExpires)
	case a.User > 0:
		d.accounts.Apply(account.Status{Tenant: t, User: a.User, Banned: a.Banned, NotBefore: a.NotBefore,
			KeptSession: a.KeptSession, KeptSince: a.KeptSince, Version: a.Version})
	}
}
