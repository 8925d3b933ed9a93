package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// SetRole asks to make User an admin or a plain member (ownership moves by TransferOwnership).
type SetRole struct {
	Actor domain.Principal
	Group domain.GroupID
	User  domain.UserID
	Role  domain.Role // domain.RoleAdmin or domain.RoleMember
	Meta  Meta
}

// SetRoleHandler handles SetRole.
type SetRoleHandler struct{ c *core }

// Handle appends member.role_set.v1; setting the role the member already has writes nothing
// (Unchanged). Owner only. The Notifier hears ChangeRoleSet so the topic's per-user permissions
// are refreshed. Errors: domain.ErrNotFound; *domain.DeniedError group_dissolved, not_member,
// not_owner, self_action, target_not_member; *domain.ValidationError for role owner or an unknown
// role; a *ConflictError when either membership changed concurrently; domain.ErrRetryable.
func (h SetRoleHandler) Handle(ctx context.Context, cmd SetRole) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	if err := checkUser("user_id", cmd.User); err != nil {
		return Result{}, err
	}
	s := spec{op: "set role", actor: cmd.Actor, meta: cmd.Meta}
	return h.c.execute(ctx, s, h.c.onMember(cmd.Actor, cmd.Group, cmd.User, true,
		func(g domain.GroupState, actor, target domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.SetRole(cmd.Actor, actor, target, cmd.Role, now)
		}))
}
