package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// AcceptInvite asks to join Group on the actor's pending invitation.
type AcceptInvite struct {
	Actor domain.Principal
	Group domain.GroupID
	Meta  Meta
}

// AcceptInviteHandler handles AcceptInvite.
type AcceptInviteHandler struct{ c *core }

// Handle appends member.joined.v1 and the group's member count change in one transaction, with
// or without join approval. Joins into one group are serialised on this node. Errors:
// domain.ErrNotFound; *domain.DeniedError group_dissolved, already_member, banned, not_invited,
// group_full; domain.ErrConcurrency after Config.MaxAttempts lost races; domain.ErrRetryable.
func (h AcceptInviteHandler) Handle(ctx context.Context, cmd AcceptInvite) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	s := spec{op: "accept invite", actor: cmd.Actor, meta: cmd.Meta, lock: domain.GroupStreamID(cmd.Group), serial: true}
	return h.c.execute(ctx, s, h.c.onSelf(cmd.Actor, cmd.Group,
		func(g domain.GroupState, m domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.AcceptInvite(cmd.Actor, m, h.c.cfg.MaxMembers, now)
		}))
}
