package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// RequestJoin asks to join a group that needs approval; Message goes to its admins.
type RequestJoin struct {
	Actor   domain.Principal
	Group   domain.GroupID
	Message string
	Meta    Meta
}

// RequestJoinHandler handles RequestJoin.
type RequestJoinHandler struct{ c *core }

// Handle appends member.join_requested.v1 (a pending request is replaced). Errors:
// domain.ErrNotFound; *domain.DeniedError group_dissolved, already_member, banned,
// approval_not_required; *domain.ValidationError for a message over domain.MaxJoinMessageLen
// characters; domain.ErrConcurrency; domain.ErrRetryable.
func (h RequestJoinHandler) Handle(ctx context.Context, cmd RequestJoin) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	s := spec{op: "request join", actor: cmd.Actor, meta: cmd.Meta}
	return h.c.execute(ctx, s, h.c.onSelf(cmd.Actor, cmd.Group,
		func(g domain.GroupState, m domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.RequestJoin(cmd.Actor, m, cmd.Message, now)
		}))
}
