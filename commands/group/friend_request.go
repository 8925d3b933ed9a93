package group

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
)

// RequestFriend asks Peer to become the actor's friend.
type RequestFriend struct {
	Actor   domain.Principal
	Peer    domain.UserID
	Message string
	Meta    Meta
}

// RequestFriendHandler handles RequestFriend.
type RequestFriendHandler struct{ c *core }

// Handle appends relation.friend_requested.v1, or relation.friend_accepted.v1 when Peer already
// asked the actor. Result.Topic is the two users' 1:1 topic. Errors: *domain.DeniedError
// already_friends, blocked (Peer blocks the actor), blocking (the actor blocks Peer),
// already_requested; *domain.ValidationError for a bad peer or a message over
// domain.MaxFriendMessageLen characters; ErrUnknownUser (domain.ErrNotFound) when Peer does not
// exist in the tenant; domain.ErrConcurrency; domain.ErrRetryable.
func (h RequestFriendHandler) Handle(ctx context.Context, cmd RequestFriend) (Result, error) {
	s, err := relationSpec("request friend", cmd.Actor, cmd.Peer, cmd.Meta)
	if err != nil {
		return Result{}, err
	}
	if err := h.c.requireUser(ctx, s.op, cmd.Actor.Tenant, "peer", cmd.Peer); err != nil {
		return Result{}, err
	}
	return h.c.execute(ctx, s, h.c.onRelation(cmd.Actor, cmd.Peer,
		func(r domain.RelationState, now time.Time) ([]domain.PendingEvent, error) {
			return r.RequestFriend(cmd.Actor, cmd.Message, now)
		}))
}
