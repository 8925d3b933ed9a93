package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// ApproveJoin asks to let User in on their pending join request.
type ApproveJoin struct {
	Actor domain.Principal
	Group domain.GroupID
	User  domain.UserID // the requester
	Meta  Meta
}

// ApproveJoinHandler handles ApproveJoin.
type ApproveJoinHandler struct{ c *core }

// Handle appends member.join_approved.v1 and member.joined.v1 to the requester's stream and the
// member count change to the group stream, in one transaction. Owner and admins only. When the
// request or the approver's own membership changes while the command runs, it fails with a
// *ConflictError rather than approving a request the approver did not see. Errors:
// domain.ErrNotFound; *domain.DeniedError group_dissolved, not_member, not_admin,
// no_pending_request, group_full; domain.ErrConcurrency; domain.ErrRetryable.
func (h ApproveJoinHandler) Handle(ctx context.Context, cmd ApproveJoin) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	if err := checkUser("user_id", cmd.User); err != nil {
		return Result{}, err
	}
	s := spec{op: "approve join", actor: cmd.Actor, meta: cmd.Meta, lock: domain.GroupStreamID(cmd.Group), serial: true}
	return h.c.execute(ctx, s, h.c.onMember(cmd.Actor, cmd.Group, cmd.User, true,
		func(g domain.GroupState, actor, target domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.ApproveJoin(cmd.Actor, actor, target, h.c.cfg.MaxMembers, now)
		}))
}
