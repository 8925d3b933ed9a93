package business

import (
	"context"
	"database/sql"
	"errors"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Friends returns uid's friends by user id (cache entry relation:friends:{uid}); none is an empty
// list, cached like any other.
func (s *Store) Friends(ctx context.Context, tenant domain.TenantID, uid domain.UserID) ([]domain.UserID, error) {
	if err := checkUserID("user_id", uid); err != nil {
		return nil, err
	}
	ids, err := s.setMembers(ctx, tenant, s.keyspace(tenant).friends(int64(uid)), func(ctx context.Context) ([]int64, error) {
		return s.loadPeers(ctx, tenant, int64(uid), "friend")
	})
	return toUserIDs(ids), err
}

// Blocklist returns the users uid blocks, by user id (cache entry relation:blocklist:{uid}).
func (s *Store) Blocklist(ctx context.Context, tenant domain.TenantID, uid domain.UserID) ([]domain.UserID, error) {
	if err := checkUserID("user_id", uid); err != nil {
		return nil, err
	}
	ids, err := s.setMembers(ctx, tenant, s.keyspace(tenant).blocklist(int64(uid)), func(ctx context.Context) ([]int64, error) {
		return s.loadPeers(ctx, tenant, int64(uid), "blocked")
	})
	return toUserIDs(ids), err
}

// IsBlocked reports whether blocker blocks blocked (cache entry relation:blocklist:{blocker}).
// The send path asks it of the receiver: a message is refused when the receiver blocks the sender.
func (s *Store) IsBlocked(ctx context.Context, tenant domain.TenantID, blocker, blocked domain.UserID) (bool, error) {
	if err := errors.Join(checkUserID("blocker", blocker), checkUserID("blocked", blocked)); err != nil {
		return false, err
	}
	return s.setHas(ctx, tenant, s.keyspace(tenant).blocklist(int64(blocker)), int64(blocked),
		func(ctx context.Context) ([]int64, error) { return s.loadPeers(ctx, tenant, int64(blocker), "blocked") },
		func(ctx context.Context) (bool, error) {
			return s.loadFlag(ctx, tenant, int64(blocker), int64(blocked), "blocked")
		})
}

// IsFriend reports whether a and b are friends (cache entry relation:friends:{a}).
func (s *Store) IsFriend(ctx context.Context, tenant domain.TenantID, a, b domain.UserID) (bool, error) {
	if err := errors.Join(checkUserID("user_id", a), checkUserID("peer_id", b)); err != nil {
		return false, err
	}
	return s.setHas(ctx, tenant, s.keyspace(tenant).friends(int64(a)), int64(b),
		func(ctx context.Context) ([]int64, error) { return s.loadPeers(ctx, tenant, int64(a), "friend") },
		func(ctx context.Context) (bool, error) { return s.loadFlag(ctx, tenant, int64(a), int64(b), "friend") })
}

// loadPeers reads the peers of uid whose flag column ("friend" or "blocked", never user input) is
// set: one range of its index.
func (s *Store) loadPeers(ctx context.Context, tenant domain.TenantID, uid int64, flag string) ([]int64, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT peer_id FROM "+q(DefaultTables().Relations)+
		" WHERE user_id = ? AND "+flag+" = 1 ORDER BY peer_id", uid)
	if err != nil {
		return nil, tenantdb.WrapErr("read relations", err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, tenantdb.WrapErr("read relations", err)
		}
		out = append(out, id)
	}
	return out, tenantdb.WrapErr("read relations", rows.Err())
}

// loadFlag reads one flag column of uid's row towards peer; false when there is no row.
func (s *Store) loadFlag(ctx context.Context, tenant domain.TenantID, uid, peer int64, flag string) (bool, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return false, err
	}
	var on bool
	err = db.QueryRowContext(ctx, "SELECT "+flag+" FROM "+q(DefaultTables().Relations)+" WHERE user_id = ? AND peer_id = ?", uid, peer).Scan(&on)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return on, tenantdb.WrapErr("read relation", err)
}

func toUserIDs(ids []int64) []domain.UserID {
	out := make([]domain.UserID, len(ids))
	for i, id := range ids {
		out[i] = domain.UserID(id)
	}
	return out
}

// BlockedBy returns the users who block uid, by user id, from MySQL (one range of the index
// idx_im_relations_blocked_by). A session on uid's channel reads it when it subscribes: the
// blockers' new 1:1 messages must not reach it.
func (s *Store) BlockedBy(ctx context.Context, tenant domain.TenantID, uid domain.UserID) ([]domain.UserID, error) {
	if err := checkUserID("user_id", uid); err != nil {
		return nil, err
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT user_id FROM "+q(DefaultTables().Relations)+
		" WHERE peer_id = ? AND blocked = 1 ORDER BY user_id", int64(uid))
	if err != nil {
		return nil, tenantdb.WrapErr("read blockers", err)
	}
	defer rows.Close()
	var out []domain.UserID
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, tenantdb.WrapErr("read blockers", err)
		}
		out = append(out, domain.UserID(id))
	}
	return out, tenantdb.WrapErr("read blockers", rows.Err())
}
