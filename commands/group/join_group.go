package group

import (
	"context"

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
// across nodes, so the member limit (Config.MaxMembers) holds exactly. On this node, joins into
// one group that arrive while the previous ones commit are decided in order and committed
// together (up to Config.JoinBatch per transaction); a batch that loses to another node is
// decided again, up to Config.MaxAttempts times. When ctx ends before the answer the join may
// still commit. Errors: domain.ErrNotFound; *domain.DeniedError group_dissolved, already_member,
// banned, approval_required, group_full; domain.ErrConcurrency when every attempt lost;
// domain.ErrRetryable.
func (h JoinGroupHandler) Handle(ctx context.Context, cmd JoinGroup) (Result, error) {
	if err := checkGroup(cmd.Group); err != nil {
		return Result{}, err
	}
	if err := checkActor(cmd.Actor); err != nil {
		return Result{}, err
	}
	return h.c.joins.join(ctx, cmd)
}
