package business

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// A user's standing in a group, as every membership query derives it. A user is a member when
// their membership row says so and the group exists and is not dissolved. The role is owner when
// the group's owner is the user, admin when their row's role is owner or admin (the admins entry),
// member otherwise; the two differ only while an ownership transfer is half projected.

// IsMember reports whether uid is a current member of group gid (cache entry
// group:{gid}:members). A group the read model does not hold wraps domain.ErrNotFound; a dissolved
// group has no members.
func (s *Store) IsMember(ctx context.Context, tenant domain.TenantID, gid domain.GroupID, uid domain.UserID) (bool, error) {
	if err := errors.Join(checkGroupID(gid), checkUserID("user_id", uid)); err != nil {
		return false, err
	}
	return s.setHas(ctx, tenant, s.keyspace(tenant).groupMembers(int64(gid)), int64(uid),
		func(ctx context.Context) ([]int64, error) { return s.loadMemberIDs(ctx, tenant, int64(gid), false) },
		func(ctx context.Context) (bool, error) {
			st, err := s.loadStanding(ctx, tenant, int64(gid), int64(uid))
			return st.member, err
		})
}

// Role returns uid's role in group gid, "" when uid is not a current member (entries
// group:{gid}:members, group:{gid}:admins and the profile's owner). Errors as IsMember.
func (s *Store) Role(ctx context.Context, tenant domain.TenantID, gid domain.GroupID, uid domain.UserID) (domain.Role, error) {
	if s.redis() == nil {
		if err := errors.Join(checkGroupID(gid), checkUserID("user_id", uid)); err != nil {
			return "", err
		}
		st, err := s.loadStanding(ctx, tenant, int64(gid), int64(uid))
		return st.role(), err
	}
	member, err := s.IsMember(ctx, tenant, gid, uid)
	if err != nil || !member {
		return "", err
	}
	g, err := s.Group(ctx, tenant, gid)
	if err != nil {
		return "", err
	}
	if g.Owner == uid {
		return domain.RoleOwner, nil
	}
	admin, err := s.setHas(ctx, tenant, s.keyspace(tenant).groupAdmins(int64(gid)), int64(uid),
		func(ctx context.Context) ([]int64, error) { return s.loadMemberIDs(ctx, tenant, int64(gid), true) },
		func(ctx context.Context) (bool, error) {
			st, err := s.loadStanding(ctx, tenant, int64(gid), int64(uid))
			return st.member && st.moderates, err
		})
	if err != nil {
		return "", err
	}
	if admin {
		return domain.RoleAdmin, nil
	}
	return domain.RoleMember, nil
}

// MutedUntil returns when uid's mute in group gid ends, or the zero time when uid is not muted
// now or not a member (cache entry group:{gid}:muted). Errors as IsMember.
func (s *Store) MutedUntil(ctx context.Context, tenant domain.TenantID, gid domain.GroupID, uid domain.UserID) (time.Time, error) {
	if err := errors.Join(checkGroupID(gid), checkUserID("user_id", uid)); err != nil {
		return time.Time{}, err
	}
	now := time.Now()
	point := func(ctx context.Context) (time.Time, error) {
		st, err := s.loadStanding(ctx, tenant, int64(gid), int64(uid))
		if err != nil || !st.member || !st.mutedUntil.After(now) {
			return time.Time{}, err
		}
		return st.mutedUntil, nil
	}
	rdb := s.redis()
	if rdb == nil {
		return point(ctx)
	}
	key := s.keyspace(tenant).groupMuted(int64(gid))
	var score, mark *redis.FloatCmd
	var fence *redis.StringCmd
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		score = p.ZScore(ctx, key, strconv.FormatInt(int64(uid), 10))
		mark = p.ZScore(ctx, key, sentinel)
		fence = p.Get(ctx, key+fenceSuffix)
		return nil
	})
	if err := cmdErr(score, mark, fence); err != nil {
		s.redisFailed(ctx, tenant, "read "+key, err)
		return point(ctx)
	}
	if mark.Err() == nil {
		if score.Err() != nil {
			return time.Time{}, nil
		}
		return liveMute(time.UnixMilli(int64(score.Val())).UTC(), now), nil
	}
	muted, err := s.loadMuted(ctx, tenant, int64(gid), now)
	if err != nil {
		return time.Time{}, err
	}
	args := []string{"0", sentinel}
	for u, until := range muted {
		args = append(args, strconv.FormatInt(until.UnixMilli(), 10), strconv.FormatInt(u, 10))
	}
	s.fill(ctx, tenant, rdb, key, fenceSeen(fence), "zset", args)
	return muted[int64(uid)], nil
}

// liveMute is until when it is after now, else zero.
func liveMute(until, now time.Time) time.Time {
	if !until.After(now) {
		return time.Time{}
	}
	return until
}

// standing is one user's membership as the point queries read it.
type standing struct {
	member     bool // a current member of an existing, not dissolved group
	owner      bool // the group's owner
	moderates  bool // row role owner or admin
	mutedUntil time.Time
}

func (st standing) role() domain.Role {
	switch {
	case !st.member:
		return ""
	case st.owner:
		return domain.RoleOwner
	case st.moderates:
		return domain.RoleAdmin
	}
	return domain.RoleMember
}

// loadStanding reads uid's standing in gid from MySQL; domain.ErrNotFound when the group is unknown.
func (s *Store) loadStanding(ctx context.Context, tenant domain.TenantID, gid, uid int64) (standing, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return standing{}, err
	}
	t := DefaultTables()
	var gstatus string
	var owner int64
	var mstatus, role sql.NullString
	var muted sql.NullTime
	err = db.QueryRowContext(ctx, "SELECT g.status, g.owner_id, m.status, m.role, m.muted_until FROM "+q(t.Groups)+
		" g LEFT JOIN "+q(t.Members)+" m ON m.group_id = g.group_id AND m.user_id = ? WHERE g.group_id = ?", uid, gid).
		Scan(&gstatus, &owner, &mstatus, &role, &muted)
	if errors.Is(err, sql.ErrNoRows) {
		return standing{}, fmt.Errorf("group %d: %w", gid, domain.ErrNotFound)
	}
	if err != nil {
		return standing{}, tenantdb.WrapErr("read membership", err)
	}
	st := standing{member: gstatus == GroupNormal && mstatus.String == string(domain.StatusMember)}
	st.owner = st.member && owner == uid
	st.moderates = role.String == string(domain.RoleOwner) || role.String == string(domain.RoleAdmin)
	st.mutedUntil = muted.Time
	return st, nil
}

// loadMemberIDs reads the ids of gid's current members (only owners and admins with moderators)
// in one statement that also tells an unknown group (domain.ErrNotFound) from a dissolved one
// (no members).
func (s *Store) loadMemberIDs(ctx context.Context, tenant domain.TenantID, gid int64, moderators bool) ([]int64, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	t := DefaultTables()
	filter := ""
	if moderators {
		filter = " AND m.role IN ('owner', 'admin')"
	}
	rows, err := db.QueryContext(ctx, "SELECT m.user_id FROM "+q(t.Groups)+" g LEFT JOIN "+q(t.Members)+
		" m ON m.group_id = g.group_id AND m.status = 'member' AND g.status = 'normal'"+filter+
		" WHERE g.group_id = ? ORDER BY m.user_id", gid)
	if err != nil {
		return nil, tenantdb.WrapErr("read members", err)
	}
	defer rows.Close()
	found := false
	var ids []int64
	for rows.Next() {
		found = true
		var id sql.NullInt64
		if err := rows.Scan(&id); err != nil {
			return nil, tenantdb.WrapErr("read members", err)
		}
		if id.Valid {
			ids = append(ids, id.Int64)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, tenantdb.WrapErr("read members", err)
	}
	if !found {
		return nil, fmt.Errorf("group %d: %w", gid, domain.ErrNotFound)
	}
	return ids, nil
}

// loadMuted reads the members of gid muted after now, with the end of their mute.
func (s *Store) loadMuted(ctx context.Context, tenant domain.TenantID, gid int64, now time.Time) (map[int64]time.Time, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	t := DefaultTables()
	rows, err := db.QueryContext(ctx, "SELECT m.user_id, m.muted_until FROM "+q(t.Groups)+" g LEFT JOIN "+q(t.Members)+
		" m ON m.group_id = g.group_id AND m.status = 'member' AND g.status = 'normal' AND m.muted_until > ?"+
		" WHERE g.group_id = ?", now.UTC(), gid)
	if err != nil {
		return nil, tenantdb.WrapErr("read muted members", err)
	}
	defer rows.Close()
	found := false
	out := map[int64]time.Time{}
	for rows.Next() {
		found = true
		var id sql.NullInt64
		var until sql.NullTime
		if err := rows.Scan(&id, &until); err != nil {
			return nil, tenantdb.WrapErr("read muted members", err)
		}
		if id.Valid {
			out[id.Int64] = until.Time
		}
	}
	if err := rows.Err(); err != nil {
		return nil, tenantdb.WrapErr("read muted members", err)
	}
	if !found {
		return nil, fmt.Errorf("group %d: %w", gid, domain.ErrNotFound)
	}
	return out, nil
}
