package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// AcceptFriend accepts Peer's pending friend request.
type AcceptFriend struct {
	Actor domain.Principal
	Peer  domain.UserID
	Meta  Meta
}

// AcceptFriendHandler handles AcceptFriend.
type AcceptFriendHandler struct{ c *core }

// Handle appends relation.friend_accepted.v1. Errors: *domain.DeniedError no_pending_request;
// *domain.ValidationError for a bad peer; domain.ErrConcurrency; domain.ErrRetryable.
func (h AcceptFriendHandler) Handle(ctx context.Context, cmd AcceptFriend) (Result, error) {
	s, err := relationSpec("accept friend", cmd.Actor, cmd.Peer, cmd.Meta)
	if err != nil {
		return Result{}, err
	}
	return h.c.execute(ctx, s, h.c.onRelation(cmd.Actor, cmd.Peer,
		func(r domain.RelationState, now time.Time) ([]domain.PendingEvent, error) {
			return r.AcceptFriend(cmd.Actor, now)
		}))
}
