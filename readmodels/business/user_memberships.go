package business

import (
	"context"
	"database/sql"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// UserMembership is one group a user is a current member of, as a conversation list shows it.
type UserMembership struct {
	Group       domain.GroupID
	Name        string
	Role        domain.Role // owner, admin or member, as Role derives it
	MemberCount int
	JoinedAt    time.Time // zero when the read model has no join time
}

// UserMemberships returns every group uid is a current member of (the group exists and is not
// dissolved), by group id, with the group's name and uid's role, in one MySQL query. It reads
// MySQL, not the Redis cache: a conversation list needs all of a user's groups at once.
// A bad uid wraps domain.ErrInvalid; an unprovisioned tenant wraps domain.ErrNotFound.
func (s *Store) UserMemberships(ctx context.Context, tenant domain.TenantID, uid domain.UserID) ([]UserMembership, error) {
	if err := checkUserID("user_id", uid); err != nil {
		return nil, err
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	t := DefaultTables()
	rows, err := db.QueryContext(ctx, "SELECT g.group_id, g.name, g.owner_id, m.role, g.member_count, m.joined_at FROM "+q(t.Members)+
		" m JOIN "+q(t.Groups)+" g ON g.group_id = m.group_id AND g.status = 'normal'"+
		" WHERE m.user_id = ? AND m.status = 'member' ORDER BY m.group_id", int64(uid))
	if err != nil {
		return nil, tenantdb.WrapErr("read user memberships", err)
	}
	defer rows.Close()
	var out []UserMembership
	for rows.Next() {
		var (
			m      UserMembership
			gid    int64
			owner  int64
			role   string
			joined sql.NullTime
		)
		if err := rows.Scan(&gid, &m.Name, &owner, &role, &m.MemberCount, &joined); err != nil {
			return nil, tenantdb.WrapErr("read user memberships", err)
		}
		m.Group = domain.GroupID(gid)
		switch {
		case owner == int64(uid):
			m.Role = domain.RoleOwner
		case role == string(domain.RoleOwner) || role == string(domain.RoleAdmin):
			m.Role = domain.RoleAdmin
		default:
			m.Role = domain.RoleMember
		}
		if joined.Valid {
			m.JoinedAt = joined.Time.UTC()
		}
		out = append(out, m)
	}
	return out, tenantdb.WrapErr("read user memberships", rows.Err())
}

// FriendRequest is a pending friend request between the caller and Peer.
type FriendRequest struct {
	Peer     domain.UserID
	Incoming bool // Peer asked the caller; false: the caller asked Peer
	Message  string
	At       time.Time // when the relation last changed
}

// FriendRequests returns uid's pending friend requests, incoming and outgoing, newest first.
// Errors as UserMemberships.
func (s *Store) FriendRequests(ctx context.Context, tenant domain.TenantID, uid domain.UserID) ([]FriendRequest, error) {
	if err := checkUserID("user_id", uid); err != nil {
		return nil, err
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT peer_id, request, request_message, updated_at FROM "+q(DefaultTables().Relations)+
		" WHERE user_id = ? AND request IN ('sent', 'received') ORDER BY updated_at DESC, peer_id", int64(uid))
	if err != nil {
		return nil, tenantdb.WrapErr("read friend requests", err)
	}
	defer rows.Close()
	var out []FriendRequest
	for rows.Next() {
		var (
			r    FriendRequest
			peer int64
			dir  string
		)
		if err := rows.Scan(&peer, &dir, &r.Message, &r.At); err != nil {
			return nil, tenantdb.WrapErr("read friend requests", err)
		}
		r.Peer, r.Incoming, r.At = domain.UserID(peer), dir == "received", r.At.UTC()
		out = append(out, r)
	}
	return out, tenantdb.WrapErr("read friend requests", rows.Err())
}
