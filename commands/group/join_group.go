package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// JoinGroup asks for the actor to join a group directly (groups without approval, or on a
// pending invitation).
type JoinGroup struct {
	Actor domain.Principal
	Group domain.GroupID
	Meta  Meta
}

// JoinGroupHandler handles JoinGroup.
type JoinGroupHandler struct{ c *core }

// Handle appends member.joined.v1 to the actor's membership stream and the member count change
// to the group stream in one transaction; the group stream's expected version serialises joins
// across nodes, so the member limit (Config.MaxMembers) holds exactly. On this node joins into one
// group take turns, so they do not lose races to each other; a join that loses to another node
// reloads and decides again, up to Config.MaxAttempts times. Errors: domain.ErrNotFound;
// *domain.DeniedError group_dissolved, already_member, banned, approval_required, group_full;
// domain.ErrConcurrency when every attempt lost; domain.ErrRetryable.
func (h JoinGroupHandler) Handle(ctx context.Context, cmd JoinGroup) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	s := spec{op: "join group", actor: cmd.Actor, meta: cmd.Meta, lock: domain.GroupStreamID(cmd.Group), serial: true}
	return h.c.execute(ctx, s, h.c.onSelf(cmd.Actor, cmd.Group,
		func(g domain.GroupState, m domain.MembershipState, now time.Time) ([]domain.PendingEvent, error) {
			return g.Join(cmd.Actor, m, h.c.cfg.MaxMembers, now)
		}))
}
