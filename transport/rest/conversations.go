package rest

import (
	"context"
	"net/http"
	"strconv"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/query"
)

// ConversationLister lists a user's conversations; *query.ConversationReader implements it.
type ConversationLister interface {
	Conversations(ctx context.Context, tenant domain.TenantID, user domain.UserID, q query.ConversationQuery) (query.ConversationPage, error)
}

// FriendRequestReader lists a user's pending friend requests; *business.Store implements it.
type FriendRequestReader interface {
	FriendRequests(ctx context.Context, tenant domain.TenantID, uid domain.UserID) ([]business.FriendRequest, error)
}

var (
	_ ConversationLister  = (*query.ConversationReader)(nil)
	_ FriendRequestReader = (*business.Store)(nil)
)

// ConversationEntry is one entry of the caller's conversation list.
type ConversationEntry struct {
	Topic       string   `json:"topic" doc:"The conversation topic: grp<group id> or p2p<low user id>_<high user id>"`
	Kind        string   `json:"kind" enum:"group,direct"`
	GroupID     string   `json:"group_id,omitempty" doc:"Groups: the group id"`
	Name        string   `json:"name,omitempty" doc:"Groups: the group's name"`
	Role        string   `json:"role,omitempty" enum:"owner,admin,member" doc:"Groups: the caller's role"`
	MemberCount int      `json:"member_count,omitempty" doc:"Groups: current members, a JSON number (bounded by the group size limit, not a 64-bit value)"`
	Peer        string   `json:"peer,omitempty" doc:"1:1: the other party's user id"`
	PeerReadSeq string   `json:"peer_read_seq,omitempty" doc:"1:1: the other party's read seq, for read receipts"`
	LastSeq     string   `json:"last_seq" doc:"The topic's watermark, as history answers it"`
	ReadSeq     string   `json:"read_seq" doc:"The caller's read seq"`
	Unread      string   `json:"unread" doc:"last_seq minus read_seq, never negative"`
	Mentions    string   `json:"mentions" doc:"Unread messages that mention the caller or everyone"`
	LastMessage *Message `json:"last_message,omitempty" doc:"The newest message up to last_seq the caller has not deleted; recalled ones without content"`
	ActiveAt    string   `json:"active_at,omitempty" doc:"What the list is ordered by: the last message's time, or when the caller joined the group if later; a 1:1 chat without messages yet, its read mark's time"`
}

// ConversationList is the data of the conversation list answer.
type ConversationList struct {
	Conversations []ConversationEntry `json:"conversations" doc:"Most recently active first"`
	NextCursor    string              `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent after the last"`
}

type conversationsInput struct {
	Cursor string `query:"cursor" doc:"The next_cursor of the previous page"`
	Limit  int    `query:"limit" minimum:"0" maximum:"100" doc:"Page size, default 20, at most 100"`
}

// FriendRequestEntry is one pending friend request.
type FriendRequestEntry struct {
	UserID    string `json:"user_id" doc:"The other user"`
	Direction string `json:"direction" enum:"incoming,outgoing" doc:"incoming: the user asked the caller (accept or decline it); outgoing: the caller asked"`
	Message   string `json:"message,omitempty"`
	At        string `json:"at"`
}

// FriendRequestList is the data of the friend request list answer.
type FriendRequestList struct {
	Requests []FriendRequestEntry `json:"requests" doc:"Newest first"`
}

func (a *API) registerConversations() {
	huma.Register(a.huma, a.build(op{id: "list-conversations", method: http.MethodGet, path: "/v1/im/conversations",
		summary: "List the caller's conversations", tag: "messages",
		desc: "The caller's groups and 1:1 conversations, most recently active first, with the last message, " +
			"unread and mention counts, from the read models. Paged with an opaque cursor."}),
		func(ctx context.Context, in *conversationsInput) (*reply[ConversationList], error) {
			p := principal(ctx)
			page, err := a.h.Conversations.Conversations(ctx, p.Tenant, p.User, query.ConversationQuery{Cursor: in.Cursor, Limit: in.Limit})
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			out := ConversationList{Conversations: make([]ConversationEntry, len(page.Conversations)), NextCursor: page.NextCursor}
			for i, c := range page.Conversations {
				e := ConversationEntry{Topic: c.Topic, Kind: c.Kind, Name: c.Name, MemberCount: c.MemberCount,
					LastSeq: strconv.FormatInt(c.LastSeq, 10), ReadSeq: strconv.FormatInt(c.ReadSeq, 10),
					Unread: strconv.FormatInt(c.Unread, 10), Mentions: strconv.FormatInt(c.Mentions, 10),
					ActiveAt: rfc3339(c.ActiveAt)}
				if c.LastMessage != nil {
					m := messageOf(*c.LastMessage)
					e.LastMessage = &m
				}
				if c.Kind == query.KindGroup {
					e.GroupID, e.Role = c.Group.String(), c.Role.String()
				} else {
					e.Peer, e.PeerReadSeq = c.Peer.String(), strconv.FormatInt(c.PeerReadSeq, 10)
				}
				out.Conversations[i] = e
			}
			return respond(ctx, http.StatusOK, out), nil
		})
}

func (a *API) registerFriendRequests() {
	huma.Register(a.huma, a.build(op{id: "list-friend-requests", method: http.MethodGet, path: "/v1/im/friends/requests",
		summary: "List the caller's pending friend requests", tag: "friends"}),
		func(ctx context.Context, _ *struct{}) (*reply[FriendRequestList], error) {
			p := principal(ctx)
			rs, err := a.h.FriendRequests.FriendRequests(ctx, p.Tenant, p.User)
			if err != nil {
				return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
			}
			out := FriendRequestList{Requests: make([]FriendRequestEntry, len(rs))}
			for i, r := range rs {
				dir := "outgoing"
				if r.Incoming {
					dir = "incoming"
				}
				out.Requests[i] = FriendRequestEntry{UserID: r.Peer.String(), Direction: dir, Message: r.Message, At: rfc3339(r.At)}
			}
			return respond(ctx, http.StatusOK, out), nil
		})
}
