package domain

import (
	"time"
)

// MaxFriendMessageLen is the longest friend-request message, in characters.
const MaxFriendMessageLen = 256

// Relation event types (Category business). Blocks are directional: relation.blocked.v1 with
// By A and Peer B means A blocks B; B blocking A is a separate fact.
const (
	EventFriendRequested EventType = "relation.friend_requested.v1"
	EventFriendAccepted  EventType = "relation.friend_accepted.v1"
	EventFriendDeclined  EventType = "relation.friend_declined.v1"
	EventFriendRemoved   EventType = "relation.friend_removed.v1"
	EventUserBlocked     EventType = "relation.blocked.v1"
	EventUserUnblocked   EventType = "relation.unblocked.v1"
)

// RelationStreamID is the stream of the relation between two distinct users:
// "relation:<lower uid>:<higher uid>", the same whichever side names it.
func RelationStreamID(a, b UserID) (string, error) {
	lo, hi, err := orderPair(a, b)
	if err != nil {
		return "", err
	}
	return "relation:" + lo.String() + ":" + hi.String(), nil
}

func orderPair(a, b UserID) (UserID, UserID, error) {
	if a <= 0 || b <= 0 {
		return 0, 0, invalid("user_id", "bad_format", "a positive 64-bit number")
	}
	if a == b {
		return 0, 0, invalid("user_id", "self_relation", "a relation needs two distinct users")
	}
	if a > b {
		a, b = b, a
	}
	return a, b, nil
}

// FriendRequested is the payload of relation.friend_requested.v1.
type FriendRequested struct {
	From        UserID    `json:"from"`
	To          UserID    `json:"to"`
	Message     string    `json:"message,omitempty"`
	RequestedAt time.Time `json:"requested_at"`
}

// FriendAccepted is the payload of relation.friend_accepted.v1: To accepted From's request and
// the two are friends.
type FriendAccepted struct {
	From       UserID    `json:"from"`
	To         UserID    `json:"to"`
	AcceptedAt time.Time `json:"accepted_at"`
}

// FriendDeclined is the payload of relation.friend_declined.v1: To declined From's request.
type FriendDeclined struct {
	From       UserID    `json:"from"`
	To         UserID    `json:"to"`
	DeclinedAt time.Time `json:"declined_at"`
}

// FriendRemoved is the payload of relation.friend_removed.v1: By ended the friendship with Peer.
type FriendRemoved struct {
	By        UserID    `json:"by"`
	Peer      UserID    `json:"peer"`
	RemovedAt time.Time `json:"removed_at"`
}

// UserBlocked is the payload of relation.blocked.v1: By blocks Peer. Pending friend requests
// between the two are dropped; a friendship stays (as in common IM apps) but Peer can no longer
// send to By.
type UserBlocked struct {
	By        UserID    `json:"by"`
	Peer      UserID    `json:"peer"`
	BlockedAt time.Time `json:"blocked_at"`
}

// UserUnblocked is the payload of relation.unblocked.v1: By no longer blocks Peer.
type UserUnblocked struct {
	By          UserID    `json:"by"`
	Peer        UserID    `json:"peer"`
	UnblockedAt time.Time `json:"unblocked_at"`
}

// RelationState is the relation between two users folded from its stream (RelationStreamID):
// friendship, a pending friend request, and a block in each direction.
type RelationState struct {
	tenant         TenantID
	lo, hi         UserID
	version        int64
	friends        bool
	requester      UserID // who has a pending friend request to the other; 0 for none
	requestMessage string
	loBlocksHi     bool
	hiBlocksLo     bool
	friendsSince   time.Time
}

// NewRelationState returns the empty relation of two distinct users (strangers, no blocks).
func NewRelationState(tenant TenantID, a, b UserID) (RelationState, error) {
	if tenant.IsZero() {
		return RelationState{}, invalid("tenant_id", "required", "")
	}
	lo, hi, err := orderPair(a, b)
	if err != nil {
		return RelationState{}, err
	}
	return RelationState{tenant: tenant, lo: lo, hi: hi}, nil
}

// FoldRelation builds the relation of a and b from its events in stream order.
func FoldRelation(tenant TenantID, a, b UserID, events []Envelope) (RelationState, error) {
	r, err := NewRelationState(tenant, a, b)
	if err != nil {
		return RelationState{}, err
	}
	for _, e := range events {
		if err := r.Apply(e); err != nil {
			return RelationState{}, err
		}
	}
	return r, nil
}

// Apply folds the next event of the relation stream into r; ErrStreamMismatch when env does not
// fit, leaving r unchanged.
func (r *RelationState) Apply(env Envelope) error {
	p, err := decodePayload(env, r.tenant, r.StreamID(), r.version)
	if err != nil {
		return err
	}
	switch e := p.(type) {
	case *FriendRequested:
		r.requester, r.requestMessage = e.From, e.Message
	case *FriendAccepted:
		r.friends, r.friendsSince = true, e.AcceptedAt
		r.requester, r.requestMessage = 0, ""
	case *FriendDeclined:
		r.requester, r.requestMessage = 0, ""
	case *FriendRemoved:
		r.friends, r.friendsSince = false, time.Time{}
	case *UserBlocked:
		r.setBlock(e.By, true)
		r.requester, r.requestMessage = 0, ""
	case *UserUnblocked:
		r.setBlock(e.By, false)
	default:
		return unknownEvent(r.StreamID(), p)
	}
	r.version = env.StreamVersion
	return nil
}

func (r *RelationState) setBlock(by UserID, on bool) {
	if by == r.lo {
		r.loBlocksHi = on
	} else {
		r.hiBlocksLo = on
	}
}

// Tenant returns the tenant.
func (r RelationState) Tenant() TenantID { return r.tenant }

// Parties returns the two users, lower id first.
func (r RelationState) Parties() (UserID, UserID) { return r.lo, r.hi }

// StreamID returns the relation's stream id.
func (r RelationState) StreamID() string {
	return "relation:" + r.lo.String() + ":" + r.hi.String()
}

// Version returns the stream version folded so far.
func (r RelationState) Version() int64 { return r.version }

// Friends reports whether the two users are friends.
func (r RelationState) Friends() bool { return r.friends }

// FriendsSince returns when the current friendship began; zero when not friends.
func (r RelationState) FriendsSince() time.Time { return r.friendsSince }

// PendingRequestFrom returns who has a pending friend request to the other, 0 for none.
func (r RelationState) PendingRequestFrom() UserID { return r.requester }

// RequestMessage returns the message of the pending friend request.
func (r RelationState) RequestMessage() string { return r.requestMessage }

// Blocks reports whether a blocks b. It is false for users who are not the two parties.
func (r RelationState) Blocks(a, b UserID) bool {
	switch {
	case a == r.lo && b == r.hi:
		return r.loBlocksHi
	case a == r.hi && b == r.lo:
		return r.hiBlocksLo
	}
	return false
}

// peerOf checks that p may act on this relation and returns the other party.
func (r RelationState) peerOf(p Principal) (UserID, error) {
	switch {
	case p.Tenant != r.tenant:
		return 0, Deny(ReasonTenantMismatch)
	case p.User == r.lo:
		return r.hi, nil
	case p.User == r.hi:
		return r.lo, nil
	}
	return 0, Deny(ReasonNotParty)
}

func (r RelationState) event(typ EventType, payload any) PendingEvent {
	return PendingEvent{StreamID: r.StreamID(), ExpectedVersion: r.version, Type: typ, Payload: payload}
}

// CanSendDirect reports whether from may open or post to the 1:1 topic with the other party of
// rel: nil, or a *DeniedError with reason blocked when the peer blocks from, not_party when from
// is not one of the two users. Friendship is not required; a user who blocks the peer may still
// send to it. The send path calls it with the relation it loaded; it does no I/O.
func CanSendDirect(rel RelationState, from UserID) error {
	peer, err := rel.peerOf(Principal{Tenant: rel.tenant, User: from})
	if err != nil {
		return err
	}
	if rel.Blocks(peer, from) {
		return Deny(ReasonBlocked)
	}
	return nil
}

// RequestFriend decides relation.friend_requested.v1 from p to the peer. When the peer already
// asked p, it decides relation.friend_accepted.v1 instead. Refusals: tenant_mismatch, not_party,
// already_friends, blocked (the peer blocks p), blocking (p blocks the peer),
// already_requested; a message over MaxFriendMessageLen characters is a *ValidationError.
func (r RelationState) RequestFriend(p Principal, message string, now time.Time) ([]PendingEvent, error) {
	peer, err := r.peerOf(p)
	if err != nil {
		return nil, err
	}
	switch {
	case r.friends:
		return nil, Deny(ReasonAlreadyFriends)
	case r.Blocks(peer, p.User):
		return nil, Deny(ReasonBlocked)
	case r.Blocks(p.User, peer):
		return nil, Deny(ReasonBlocking)
	case r.requester == p.User:
		return nil, Deny(ReasonAlreadyRequested)
	case r.requester == peer:
		return []PendingEvent{r.event(EventFriendAccepted, &FriendAccepted{From: peer, To: p.User, AcceptedAt: now.UTC()})}, nil
	}
	if err := checkText("message", message, false, MaxFriendMessageLen, true); err != nil {
		return nil, err
	}
	return []PendingEvent{r.event(EventFriendRequested, &FriendRequested{From: p.User, To: peer,
		Message: message, RequestedAt: now.UTC()})}, nil
}

// AcceptFriend decides relation.friend_accepted.v1 for the peer's pending request to p.
// Refusals: tenant_mismatch, not_party, no_pending_request.
func (r RelationState) AcceptFriend(p Principal, now time.Time) ([]PendingEvent, error) {
	peer, err := r.pendingFromPeer(p)
	if err != nil {
		return nil, err
	}
	return []PendingEvent{r.event(EventFriendAccepted, &FriendAccepted{From: peer, To: p.User, AcceptedAt: now.UTC()})}, nil
}

// DeclineFriend decides relation.friend_declined.v1 for the peer's pending request to p.
// Refusals as AcceptFriend.
func (r RelationState) DeclineFriend(p Principal, now time.Time) ([]PendingEvent, error) {
	peer, err := r.pendingFromPeer(p)
	if err != nil {
		return nil, err
	}
	return []PendingEvent{r.event(EventFriendDeclined, &FriendDeclined{From: peer, To: p.User, DeclinedAt: now.UTC()})}, nil
}

func (r RelationState) pendingFromPeer(p Principal) (UserID, error) {
	peer, err := r.peerOf(p)
	if err != nil {
		return 0, err
	}
	if r.requester != peer {
		return 0, Deny(ReasonNoPendingRequest)
	}
	return peer, nil
}

// RemoveFriend decides relation.friend_removed.v1. Refusals: tenant_mismatch, not_party, not_friends.
func (r RelationState) RemoveFriend(p Principal, now time.Time) ([]PendingEvent, error) {
	peer, err := r.peerOf(p)
	if err != nil {
		return nil, err
	}
	if !r.friends {
		return nil, Deny(ReasonNotFriends)
	}
	return []PendingEvent{r.event(EventFriendRemoved, &FriendRemoved{By: p.User, Peer: peer, RemovedAt: now.UTC()})}, nil
}

// Block decides relation.blocked.v1: p blocks the peer. Refusals: tenant_mismatch, not_party,
// already_blocked.
func (r RelationState) Block(p Principal, now time.Time) ([]PendingEvent, error) {
	peer, err := r.peerOf(p)
	if err != nil {
		return nil, err
	}
	if r.Blocks(p.User, peer) {
		return nil, Deny(ReasonAlreadyBlocked)
	}
	return []PendingEvent{r.event(EventUserBlocked, &UserBlocked{By: p.User, Peer: peer, BlockedAt: now.UTC()})}, nil
}

// Unblock decides relation.unblocked.v1. Refusals: tenant_mismatch, not_party, not_blocked.
func (r RelationState) Unblock(p Principal, now time.Time) ([]PendingEvent, error) {
	peer, err := r.peerOf(p)
	if err != nil {
		return nil, err
	}
	if !r.Blocks(p.User, peer) {
		return nil, Deny(ReasonNotBlocked)
	}
	return []PendingEvent{r.event(EventUserUnblocked, &UserUnblocked{By: p.User, Peer: peer, UnblockedAt: now.UTC()})}, nil
}
