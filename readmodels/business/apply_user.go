package business

import (
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
)

// userRow is one im_users row: a public profile, the login name search finds the user by and
// whether search may, never credentials. A row whose nickname is empty holds a registration
// whose profile is not projected yet: it is no profile.
type userRow struct {
	id           int64
	login        string
	nickname     string
	avatar       string
	signature    string
	discoverable bool
	version      int64
	updatedAt    time.Time
}

// newUserRow is the row of a user no event was folded into: discoverable, as the domain says.
func newUserRow(id int64) userRow { return userRow{id: id, discoverable: true} }

var userCols = []string{"user_id", "login", "nickname", "avatar", "signature", "discoverable", "version", "updated_at"}

var userColList = strings.Join(userCols, ", ")

func (u userRow) values() []any {
	return []any{u.id, u.login, u.nickname, u.avatar, u.signature, u.discoverable, u.version, u.updatedAt}
}

func scanUser(row interface{ Scan(...any) error }) (userRow, error) {
	var u userRow
	err := row.Scan(&u.id, &u.login, &u.nickname, &u.avatar, &u.signature, &u.discoverable, &u.version, &u.updatedAt)
	return u, err
}

// foldUser is domain.ProfileState.Apply over a row. The login is kept in the form
// domain.NewLogin gives it (ASCII lower case); a login it refuses (none is written so) is kept
// empty, so a bad event cannot stop the projection.
func foldUser(u userRow, p any) userRow {
	switch e := p.(type) {
	case *domain.UserRegistered:
		u.login = ""
		if l, err := domain.NewLogin(e.Login); err == nil {
			u.login = l.String()
		}
	case *domain.UserProfileUpdated:
		u.nickname, u.avatar, u.signature = e.Nickname, e.Avatar, e.Signature
	case *domain.UserDiscoverableSet:
		u.discoverable = e.Discoverable
	}
	return u
}

// profileUser returns the user a profile-stream payload is about, and whether p is one.
func profileUser(p any) (int64, bool) {
	switch e := p.(type) {
	case *domain.UserRegistered:
		return int64(e.User), true
	case *domain.UserProfileUpdated:
		return int64(e.User), true
	case *domain.UserDiscoverableSet:
		return int64(e.User), true
	}
	return 0, false
}
