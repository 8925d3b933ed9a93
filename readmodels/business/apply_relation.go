package business

import (
	"database/sql"
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
)

// Relation request states as stored in im_relations.request, from the row owner's side.
const (
	requestNone     = ""
	requestSent     = "sent"     // user_id asked peer_id
	requestReceived = "received" // peer_id asked user_id
)

// relationRow is one direction of a relation: user's side towards peer.
type relationRow struct {
	user, peer     int64
	friend         bool
	blocked        bool // user blocks peer
	request        string
	requestMessage string
	friendsSince   time.Time
	version        int64
	updatedAt      time.Time
}

var relationCols = []string{"user_id", "peer_id", "friend", "blocked", "request", "request_message",
	"friends_since", "version", "updated_at"}

var relationColList = strings.Join(relationCols, ", ")

func (r relationRow) values() []any {
	return []any{r.user, r.peer, r.friend, r.blocked, r.request, r.requestMessage, nullTime(r.friendsSince),
		r.version, r.updatedAt}
}

// pair is the relation of two users as domain.RelationState folds it.
type pair struct {
	lo, hi       int64
	friends      bool
	requester    int64 // who has a pending request to the other; 0 for none
	message      string
	loBlocksHi   bool
	hiBlocksLo   bool
	friendsSince time.Time
	version      int64
	updatedAt    time.Time
}

// rows returns both directions of p, lo's side first.
func (p pair) rows() [2]relationRow {
	side := func(user, peer int64, blocks bool) relationRow {
		r := relationRow{user: user, peer: peer, friend: p.friends, blocked: blocks, friendsSince: p.friendsSince,
			version: p.version, updatedAt: p.updatedAt}
		switch p.requester {
		case user:
			r.request, r.requestMessage = requestSent, p.message
		case peer:
			r.request, r.requestMessage = requestReceived, p.message
		}
		return r
	}
	return [2]relationRow{side(p.lo, p.hi, p.loBlocksHi), side(p.hi, p.lo, p.hiBlocksLo)}
}

// absorb takes what row r says about the pair.
func (p *pair) absorb(r relationRow) {
	p.friends = p.friends || r.friend
	if r.friend && p.friendsSince.IsZero() {
		p.friendsSince = r.friendsSince
	}
	if r.user == p.lo {
		p.loBlocksHi = r.blocked
	} else {
		p.hiBlocksLo = r.blocked
	}
	if r.request == requestSent {
		p.requester, p.message = r.user, r.requestMessage
	}
	p.version = max(p.version, r.version)
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// scanRelation reads a row selected with relationColList.
func scanRelation(row interface{ Scan(...any) error }) (relationRow, error) {
	var r relationRow
	var since sql.NullTime
	err := row.Scan(&r.user, &r.peer, &r.friend, &r.blocked, &r.request, &r.requestMessage, &since,
		&r.version, &r.updatedAt)
	r.friendsSince = since.Time
	return r, err
}

// foldPair is domain.RelationState.Apply over the pair.
func foldPair(p pair, payload any) pair {
	setBlock := func(by int64, on bool) {
		if by == p.lo {
			p.loBlocksHi = on
		} else {
			p.hiBlocksLo = on
		}
	}
	switch e := payload.(type) {
	case *domain.FriendRequested:
		p.requester, p.message = int64(e.From), e.Message
	case *domain.FriendAccepted:
		p.friends, p.friendsSince = true, readmodels.Millis(e.AcceptedAt)
		p.requester, p.message = 0, ""
	case *domain.FriendDeclined:
		p.requester, p.message = 0, ""
	case *domain.FriendRemoved:
		p.friends, p.friendsSince = false, time.Time{}
	case *domain.UserBlocked:
		setBlock(int64(e.By), true)
		p.requester, p.message = 0, ""
	case *domain.UserUnblocked:
		setBlock(int64(e.By), false)
	}
	return p
}

// relationParties returns the two users a relation payload names.
func relationParties(p any) (int64, int64) {
	switch e := p.(type) {
	case *domain.FriendRequested:
		return int64(e.From), int64(e.To)
	case *domain.FriendAccepted:
		return int64(e.From), int64(e.To)
	case *domain.FriendDeclined:
		return int64(e.From), int64(e.To)
	case *domain.FriendRemoved:
		return int64(e.By), int64(e.Peer)
	case *domain.UserBlocked:
		return int64(e.By), int64(e.Peer)
	case *domain.UserUnblocked:
		return int64(e.By), int64(e.Peer)
	}
	return 0, 0
}
