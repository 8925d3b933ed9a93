package rest

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
)

type peerWrite struct {
	IdempotencyHeader
	UID string `path:"uid" doc:"The other user's id (64-bit decimal)" example:"42"`
}

type friendRequestInput struct {
	IdempotencyHeader
	Body struct {
		UserID  string `json:"user_id" doc:"The user asked (64-bit, as a string)" example:"42"`
		Message string `json:"message,omitempty" doc:"A note to the user"`
	}
}

type blockInput struct {
	IdempotencyHeader
	Body userBody
}

// relationCommand registers a relation command with the given tag.
func relationCommand[I any](a *API, tag string, o op, h func(context.Context, *I) (*reply[CommandResult], error)) {
	o.tag = tag
	o.errs = append(o.errs, http.StatusForbidden)
	huma.Register(a.huma, a.build(o), h)
}

func (a *API) registerRelationCommands() {
	g := a.h.Groups
	relationCommand(a, "friends", op{id: "request-friend", method: http.MethodPost, path: "/v1/im/friends/requests",
		summary: "Ask a user to be friends", desc: "When the user already asked the caller, they become friends at once. " +
			"403 already_friends, already_requested, blocked, blocking."},
		func(ctx context.Context, in *friendRequestInput) (*reply[CommandResult], error) {
			if err := a.limitAction(ctx, domain.RateFriendRequestUser); err != nil {
				return nil, err
			}
			p := principal(ctx)
			peer, err := userParam(p, "user_id", in.Body.UserID)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			cmd := group.RequestFriend{Actor: p.domain(), Peer: peer, Message: in.Body.Message, Meta: meta(ctx)}
			return a.command(ctx, http.StatusOK, func() (group.Result, error) { return g.RequestFriend.Handle(ctx, cmd) })
		})
	relationCommand(a, "blocks", op{id: "block-user", method: http.MethodPost, path: "/v1/im/blocks",
		summary: "Block a user", desc: "The user can no longer send the caller 1:1 messages; pending friend requests are dropped. 403 already_blocked."},
		func(ctx context.Context, in *blockInput) (*reply[CommandResult], error) {
			p := principal(ctx)
			peer, err := userParam(p, "user_id", in.Body.UserID)
			if err != nil {
				return nil, a.fail(ctx, err)
			}
			cmd := group.BlockUser{Actor: p.domain(), Peer: peer, Meta: meta(ctx)}
			return a.command(ctx, http.StatusOK, func() (group.Result, error) { return g.BlockUser.Handle(ctx, cmd) })
		})
	peers := []struct {
		tag, id, method, path, summary, desc string
		run                                  func(context.Context, domain.Principal, domain.UserID, group.Meta) (group.Result, error)
	}{
		{"friends", "accept-friend", http.MethodPost, "/v1/im/friends/requests/{uid}/accept", "Accept a friend request", "403 no_pending_request.",
			func(ctx context.Context, p domain.Principal, peer domain.UserID, m group.Meta) (group.Result, error) {
				return g.AcceptFriend.Handle(ctx, group.AcceptFriend{Actor: p, Peer: peer, Meta: m})
			}},
		{"friends", "decline-friend", http.MethodPost, "/v1/im/friends/requests/{uid}/decline", "Decline a friend request", "403 no_pending_request.",
			func(ctx context.Context, p domain.Principal, peer domain.UserID, m group.Meta) (group.Result, error) {
				return g.DeclineFriend.Handle(ctx, group.DeclineFriend{Actor: p, Peer: peer, Meta: m})
			}},
		{"friends", "remove-friend", http.MethodDelete, "/v1/im/friends/{uid}", "Remove a friend", "403 not_friends.",
			func(ctx context.Context, p domain.Principal, peer domain.UserID, m group.Meta) (group.Result, error) {
				return g.RemoveFriend.Handle(ctx, group.RemoveFriend{Actor: p, Peer: peer, Meta: m})
			}},
		{"blocks", "unblock-user", http.MethodDelete, "/v1/im/blocks/{uid}", "Unblock a user", "403 not_blocked.",
			func(ctx context.Context, p domain.Principal, peer domain.UserID, m group.Meta) (group.Result, error) {
				return g.UnblockUser.Handle(ctx, group.UnblockUser{Actor: p, Peer: peer, Meta: m})
			}},
	}
	for _, s := range peers {
		relationCommand(a, s.tag, op{id: s.id, method: s.method, path: s.path, summary: s.summary, desc: s.desc},
			func(ctx context.Context, in *peerWrite) (*reply[CommandResult], error) {
				p := principal(ctx)
				peer, err := userParam(p, "uid", in.UID)
				if err != nil {
					return nil, a.fail(ctx, err)
				}
				return a.command(ctx, http.StatusOK, func() (group.Result, error) { return s.run(ctx, p.domain(), peer, meta(ctx)) })
			})
	}
}
