package business

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// userRow is one im_users row: a public profile, never credentials.
type userRow struct {
	id        int64
	nickname  string
	avatar    string
	signature string
	version   int64
	updatedAt time.Time
}

var userCols = []string{"user_id", "nickname", "avatar", "signature", "version", "updated_at"}

var userColList = strings.Join(userCols, ", ")

func (u userRow) values() []any {
	return []any{u.id, u.nickname, u.avatar, u.signature, u.version, u.updatedAt}
}

func scanUser(row interface{ Scan(...any) error }) (userRow, error) {
	var u userRow
	err := row.Scan(&u.id, &u.nickname, &u.avatar, &u.signature, &u.version, &u.updatedAt)
	return u, err
}

// applyUser folds user.profile_updated.v1 into im_users and marks the profile entry stale.
func (a *applier) applyUser(ctx context.Context, o op) error {
	e := o.payload.(*domain.UserProfileUpdated)
	uid := int64(e.User)
	old, err := scanUser(a.tx.QueryRowContext(ctx, "SELECT "+userColList+" FROM "+q(a.t.Users)+" WHERE user_id = ? FOR UPDATE", uid))
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return tenantdb.WrapErr("apply: read user", err)
	}
	if found && old.version >= o.env.StreamVersion {
		return nil
	}
	u := userRow{id: uid, nickname: e.Nickname, avatar: e.Avatar, signature: e.Signature,
		version: o.env.StreamVersion, updatedAt: o.at()}
	if err := a.writeRow(ctx, found, a.t.Users, userCols, u.values(), 1); err != nil {
		return err
	}
	a.touch(a.ks.userProfile(uid))
	return nil
}
