package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// TransferOwnership asks to hand Group to To, a current member; the owner becomes a member.
type TransferOwnership struct {
	Actor domain.Principal
	Group domain.GroupID
	To    domain.UserID
	Meta  Meta
}

// TransferOwnershipHandler handles TransferOwnership.
type TransferOwnershipHandler struct{ c *core }

// Handle appends group.ownership_transferred.v1 to the group stream and member.role_set.v1 to
// the new and the old owner's membership streams, in one transaction checked against all three
// expected versions. A concurrent removal of the new owner writes the new owner's stream and the
// group stream too, so exactly one of the two commits: the other fails with a *ConflictError
// (wrapping domain.ErrConcurrency), never with a retry that would act on the changed state, and
// the folded state never shows a removed owner. A transfer that merely lost to an unrelated
// group-stream append (a join) is decided again. Errors: domain.ErrNotFound; *domain.DeniedError
// group_dissolved, not_member, not_owner, self_action, target_not_member; domain.ErrConcurrency;
// domain.ErrRetryable.
func (h TransferOwnershipHandler) Handle(ctx context.Context, cmd TransferOwnership) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	if err := checkUser("to", cmd.To); err != nil {
		return Result{}, err
	}
	s := spec{op: "transfer ownership", actor: cmd.Actor, meta: cmd.Meta, lock: domain.GroupStreamID(cmd.Group)}
	return h.c.execute(ctx, s, h.c.onMember(cmd.Actor, cmd.Group, cmd.To, true,
		func(g domain.GroupState, actor, target domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.TransferOwnership(cmd.Actor, actor, target, now)
		}))
}
