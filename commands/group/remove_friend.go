package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// RemoveFriend ends the actor's friendship with Peer.
type RemoveFriend struct {
	Actor domain.Principal
	Peer  domain.UserID
	Meta  Meta
}

// RemoveFriendHandler handles RemoveFriend.
type RemoveFriendHandler struct{ c *core }

// Handle appends relation.friend_removed.v1. Errors: *domain.DeniedError not_friends;
// *domain.ValidationError for a bad peer; domain.ErrConcurrency; domain.ErrRetryable.
func (h RemoveFriendHandler) Handle(ctx context.Context, cmd RemoveFriend) (Result, error) {
	s, err := relationSpec("remove friend", cmd.Actor, cmd.Peer, cmd.Meta)
	if err != nil {
		return Result{}, err
	}
	return h.c.execute(ctx, s, h.c.onRelation(cmd.Actor, cmd.Peer,
		func(r domain.RelationState, now time.Time) ([]domain.PendingEvent, error) {
			return r.RemoveFriend(cmd.Actor, now)
		}))
}
