package business

import (
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
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

// foldUser is domain.ProfileState.Apply over a row.
func foldUser(u userRow, e *domain.UserProfileUpdated) userRow {
	u.nickname, u.avatar, u.signature = e.Nickname, e.Avatar, e.Signature
	return u
}
