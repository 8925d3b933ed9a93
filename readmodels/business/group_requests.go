package business

import (
	"context"
	"slices"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// MaxGroupRequests bounds the pending group requests GroupRequests returns.
const MaxGroupRequests = 500

// GroupRequest is a pending invitation or join request a user has a say in.
type GroupRequest struct {
	Group domain.GroupID
	Name  string // the group's name
	// Invitation: an invitation to the user (By invited them); otherwise a join request.
	Invitation bool
	// Incoming: the user decides it (an invitation to them, a request to a group they own or
	// administer); otherwise it is the user's own request, which others decide.
	Incoming bool
	User     domain.UserID // the invitee or the requester
	By       domain.UserID // the inviter; 0 for a join request
	Message  string        // a join request's message
	At       time.Time     // when the membership last changed
}

// GroupRequests returns the pending group requests uid has a say in, newest first, at most
// MaxGroupRequests: invitations to uid, uid's own join requests, and the join requests of the
// groups uid owns or administers; dissolved groups are left out. Two MySQL queries, each ranges
// of the member indexes. A client re-reads it when the per-user channel says resync. Errors as
// UserMemberships.
func (s *Store) GroupRequests(ctx context.Context, tenant domain.TenantID, uid domain.UserID) ([]GroupRequest, error) {
	if err := checkUserID("user_id", uid); err != nil {
		return nil, err
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	t := DefaultTables()
	var out []GroupRequest
	scan := func(query string, incoming func(status string) bool, args ...any) error {
		rows, err := db.QueryContext(ctx, query, args...)
		if err != nil {
			return tenantdb.WrapErr("read group requests", err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				r             GroupRequest
				gid, user, by int64
				status        string
			)
			if err := rows.Scan(&gid, &r.Name, &user, &status, &by, &r.Message, &r.At); err != nil {
				return tenantdb.WrapErr("read group requests", err)
			}
			r.Group, r.User, r.By, r.At = domain.GroupID(gid), domain.UserID(user), domain.UserID(by), r.At.UTC()
			r.Invitation, r.Incoming = status == string(domain.StatusInvited), incoming(status)
			if !r.Invitation {
				r.By = 0
			}
			out = append(out, r)
		}
		return tenantdb.WrapErr("read group requests", rows.Err())
	}
	// The user's own: invitations to them (theirs to decide) and their join requests.
	err = scan("SELECT m.group_id, g.name, m.user_id, m.status, m.invited_by, m.request_message, m.updated_at FROM "+q(t.Members)+
		" m JOIN "+q(t.Groups)+" g ON g.group_id = m.group_id AND g.status = 'normal'"+
		" WHERE m.user_id = ? AND m.status IN ('invited', 'requested') ORDER BY m.updated_at DESC LIMIT ?",
		func(status string) bool { return status == string(domain.StatusInvited) }, int64(uid), MaxGroupRequests)
	if err != nil {
		return nil, err
	}
	// The join requests of the groups they decide.
	err = scan("SELECT r.group_id, g.name, r.user_id, r.status, r.invited_by, r.request_message, r.updated_at FROM "+q(t.Members)+
		" me JOIN "+q(t.Groups)+" g ON g.group_id = me.group_id AND g.status = 'normal'"+
		" JOIN "+q(t.Members)+" r ON r.group_id = me.group_id AND r.status = 'requested'"+
		" WHERE me.user_id = ? AND me.status = 'member' AND (me.role IN ('owner', 'admin') OR g.owner_id = me.user_id)"+
		" ORDER BY r.updated_at DESC LIMIT ?",
		func(string) bool { return true }, int64(uid), MaxGroupRequests)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b GroupRequest) int { return b.At.Compare(a.At) })
	return out[:min(len(out), MaxGroupRequests)], nil
}
