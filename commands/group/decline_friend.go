package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// DeclineFriend declines Peer's pending friend request.
type DeclineFriend struct {
	Actor domain.Principal
	Peer  domain.UserID
	Meta  Meta
}

// DeclineFriendHandler handles DeclineFriend.
type DeclineFriendHandler struct{ c *core }

// Handle appends relation.friend_declined.v1. Errors as AcceptFriendHandler.Handle.
func (h DeclineFriendHandler) Handle(ctx context.Context, cmd DeclineFriend) (Result, error) {
	s, err := relationSpec("decline friend", cmd.Actor, cmd.Peer, cmd.Meta)
	if err != nil {
		return Result{}, err
	}
	return h.c.execute(ctx, s, h.c.onRelation(cmd.Actor, cmd.Peer,
		func(r domain.RelationState, now time.Time) ([]domain.PendingEvent, error) {
			return r.DeclineFriend(cmd.Actor, now)
		}))
}
