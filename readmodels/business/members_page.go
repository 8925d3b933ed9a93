package business

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Member is one entry of a group's member list.
type Member struct {
	User       domain.UserID
	Role       domain.Role // the role the membership row holds
	JoinedAt   time.Time
	MutedUntil time.Time // zero when not muted; may lie in the past
}

// pageRoles is the order of a member list: the owner, then admins, then members, each by user id.
var pageRoles = []domain.Role{domain.RoleOwner, domain.RoleAdmin, domain.RoleMember}

// memberCursor is a position in a member list: after user uid within role rank.
type memberCursor struct {
	rank int
	uid  int64
}

func (c memberCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte("m1:" + strconv.Itoa(c.rank) + ":" + strconv.FormatInt(c.uid, 10)))
}

func parseMemberCursor(s string) (memberCursor, error) {
	if s == "" {
		return memberCursor{}, nil
	}
	bad := &domain.ValidationError{Field: "cursor", Reason: "bad_format", Detail: "not a cursor this list returned"}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return memberCursor{}, bad
	}
	parts := strings.Split(string(raw), ":")
	if len(parts) != 3 || parts[0] != "m1" {
		return memberCursor{}, bad
	}
	rank, err1 := strconv.Atoi(parts[1])
	uid, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || rank < 0 || rank >= len(pageRoles) || uid < 0 {
		return memberCursor{}, bad
	}
	return memberCursor{rank: rank, uid: uid}, nil
}

// Members returns one page of group gid's current members, ordered owner first, then admins, then
// members, each by user id, and the cursor of the next page ("" after the last). The cursor is
// opaque and keyset-based: users who join while a client pages through appear at most once, and
// every member present throughout appears exactly once, as long as their role does not change
// meanwhile. limit <= 0 means Config.DefaultPageSize; it is capped at Config.MaxPageSize. Pages
// are read from MySQL. A dissolved group has no members; an unknown group wraps domain.ErrNotFound;
// a malformed cursor wraps domain.ErrInvalid.
func (s *Store) Members(ctx context.Context, tenant domain.TenantID, gid domain.GroupID, cursor string, limit int) (page []Member, next string, err error) {
	if err := checkGroupID(gid); err != nil {
		return nil, "", err
	}
	at, err := parseMemberCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	if limit <= 0 {
		limit = s.cfg.DefaultPageSize
	}
	limit = min(limit, s.cfg.MaxPageSize)
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, "", err
	}
	var status string
	err = db.QueryRowContext(ctx, "SELECT status FROM "+q(DefaultTables().Groups)+" WHERE group_id = ?", int64(gid)).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", fmt.Errorf("group %s: %w", gid, domain.ErrNotFound)
	}
	if err != nil {
		return nil, "", tenantdb.WrapErr("read members", err)
	}
	if status != GroupNormal {
		return nil, "", nil
	}
	// One more than the page tells whether a next page exists.
	want := limit + 1
	for rank := at.rank; rank < len(pageRoles) && len(page) < want; rank++ {
		after := int64(0)
		if rank == at.rank {
			after = at.uid
		}
		got, err := s.membersOfRole(ctx, db, int64(gid), pageRoles[rank], after, want-len(page))
		if err != nil {
			return nil, "", err
		}
		page = append(page, got...)
	}
	if len(page) < want {
		return page, "", nil
	}
	page = page[:limit]
	last := page[limit-1]
	return page, memberCursor{rank: roleRank(last.Role), uid: int64(last.User)}.String(), nil
}

func roleRank(r domain.Role) int {
	for i, pr := range pageRoles {
		if pr == r {
			return i
		}
	}
	return len(pageRoles) - 1
}

// membersOfRole reads up to n members of gid with role after user id after: one range of the
// (group_id, status, role, user_id) index.
func (s *Store) membersOfRole(ctx context.Context, db *sql.DB, gid int64, role domain.Role, after int64, n int) ([]Member, error) {
	rows, err := db.QueryContext(ctx, "SELECT user_id, role, joined_at, muted_until FROM "+q(DefaultTables().Members)+
		" WHERE group_id = ? AND status = 'member' AND role = ? AND user_id > ? ORDER BY user_id LIMIT ?",
		gid, string(role), after, n)
	if err != nil {
		return nil, tenantdb.WrapErr("read members", err)
	}
	defer rows.Close()
	var out []Member
	for rows.Next() {
		var m Member
		var r string
		var joined, muted sql.NullTime
		if err := rows.Scan(&m.User, &r, &joined, &muted); err != nil {
			return nil, tenantdb.WrapErr("read members", err)
		}
		m.Role, m.JoinedAt, m.MutedUntil = domain.Role(r), joined.Time, muted.Time
		out = append(out, m)
	}
	return out, tenantdb.WrapErr("read members", rows.Err())
}

// UserGroups returns the groups uid is a current member of, by group id; dissolved groups and
// groups whose creation is not projected yet are left out. It reads MySQL (index user_id, status).
func (s *Store) UserGroups(ctx context.Context, tenant domain.TenantID, uid domain.UserID) ([]domain.GroupID, error) {
	if err := checkUserID("user_id", uid); err != nil {
		return nil, err
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	t := DefaultTables()
	rows, err := db.QueryContext(ctx, "SELECT m.group_id FROM "+q(t.Members)+" m JOIN "+q(t.Groups)+
		" g ON g.group_id = m.group_id AND g.status = 'normal' WHERE m.user_id = ? AND m.status = 'member' ORDER BY m.group_id", int64(uid))
	if err != nil {
		return nil, tenantdb.WrapErr("read user groups", err)
	}
	defer rows.Close()
	var out []domain.GroupID
	for rows.Next() {
		var g int64
		if err := rows.Scan(&g); err != nil {
			return nil, tenantdb.WrapErr("read user groups", err)
		}
		out = append(out, domain.GroupID(g))
	}
	return out, tenantdb.WrapErr("read user groups", rows.Err())
}
