package business

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// User is a user's public profile. It never holds credentials or verification data.
type User struct {
	ID        domain.UserID
	Nickname  string
	Avatar    string
	Signature string
	Version   int64 // the profile stream version
	UpdatedAt time.Time
}

func (u userRow) pairs() []string {
	return []string{
		"user_id", strconv.FormatInt(u.id, 10),
		"nickname", u.nickname,
		"avatar", u.avatar,
		"signature", u.signature,
		"version", strconv.FormatInt(u.version, 10),
		"updated_at", unixMillis(u.updatedAt),
	}
}

func decodeUser(m map[string]string) (User, error) {
	r := fieldReader{m: m}
	u := User{ID: domain.UserID(r.int("user_id")), Nickname: r.str("nickname"), Avatar: r.str("avatar"),
		Signature: r.str("signature"), Version: r.int("version"), UpdatedAt: r.time("updated_at")}
	return u, r.err
}

// User returns uid's public profile (cache entry user:{uid}:profile). A user who never set a
// profile wraps domain.ErrNotFound.
func (s *Store) User(ctx context.Context, tenant domain.TenantID, uid domain.UserID) (User, error) {
	if err := checkUserID("user_id", uid); err != nil {
		return User{}, err
	}
	key := s.keyspace(tenant).userProfile(int64(uid))
	return cachedHash(ctx, s, tenant, key, func(ctx context.Context) ([]string, error) {
		db, err := s.router.DB(ctx, tenant)
		if err != nil {
			return nil, err
		}
		u, err := scanUser(db.QueryRowContext(ctx, "SELECT "+userColList+" FROM "+q(DefaultTables().Users)+" WHERE user_id = ?", int64(uid)))
		if errors.Is(err, sql.ErrNoRows) || (err == nil && u.nickname == "") {
			return nil, fmt.Errorf("user %s: %w", uid, domain.ErrNotFound) // no profile yet: a registration alone
		}
		if err != nil {
			return nil, tenantdb.WrapErr("read user", err)
		}
		return u.pairs(), nil
	}, decodeUser)
}
