package business

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Search limits.
const (
	// MaxSearchPrefix is the longest prefix a search takes, in characters (a group name's
	// length; nicknames and logins are shorter).
	MaxSearchPrefix = domain.MaxGroupNameLen
	// DefaultSearchLimit is a search page's size when none is asked for; MaxSearchLimit caps it.
	DefaultSearchLimit = 20
	MaxSearchLimit     = 50
	// MaxUsersByID is the most users one UsersByID call reads.
	MaxUsersByID = 100
)

// SearchBy names what a user search matches its prefix against.
type SearchBy string

// The fields a user search matches.
const (
	// SearchByNickname matches the start of the nickname, case- and accent-insensitively (the
	// column's utf8mb4_unicode_ci: "ali" finds "Alice" and "Álvaro" is found by "al").
	SearchByNickname SearchBy = "nickname"
	// SearchByLogin matches the start of the login name; the prefix is folded as a login is
	// (ASCII upper case to lower case) and compared byte for byte.
	SearchByLogin SearchBy = "login"
)

// UserSearch is a search of a tenant's users by prefix.
type UserSearch struct {
	// Searcher is who searches: users who block them are not found. A user the searcher blocks
	// is found, with BlockedBySearcher set, so the searcher can find them to unblock them.
	Searcher domain.UserID
	By       SearchBy
	Prefix   string
	Cursor   string // the next cursor of the previous page; empty for the first
	Limit    int    // 0: DefaultSearchLimit; at most MaxSearchLimit
}

// UserHit is a user a search found: the public profile and the login name.
type UserHit struct {
	User
	Login             string
	BlockedBySearcher bool // the searcher blocks this user
}

// GroupSearch is a search of a tenant's discoverable groups by name prefix (case- and
// accent-insensitive, as SearchByNickname).
type GroupSearch struct {
	Prefix string
	Cursor string
	Limit  int
}

// GroupHit is a group a search found.
type GroupHit struct {
	ID           domain.GroupID
	Name         string
	Avatar       string
	Intro        string
	MemberCount  int
	JoinApproval bool
}

// searchCursor is what a page's next cursor holds: the sort key and id of its last hit.
type searchCursor struct {
	Key string `json:"k"`
	ID  int64  `json:"i"`
}

func encodeCursor(key string, id int64) string {
	b, _ := json.Marshal(searchCursor{Key: key, ID: id})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (searchCursor, error) {
	var c searchCursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || c.ID <= 0 {
		return c, &domain.ValidationError{Field: "cursor", Reason: "bad_format", Detail: "the next_cursor of a previous page"}
	}
	return c, nil
}

// checkPrefix validates a search prefix: 1 to MaxSearchPrefix characters of UTF-8 without
// control characters.
func checkPrefix(p string) error {
	switch {
	case p == "":
		return &domain.ValidationError{Field: "q", Reason: "required"}
	case !utf8.ValidString(p) || strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return &domain.ValidationError{Field: "q", Reason: domain.ReasonBadText, Detail: "UTF-8 without control characters"}
	case utf8.RuneCountInString(p) > MaxSearchPrefix:
		return &domain.ValidationError{Field: "q", Reason: "too_long", Detail: fmt.Sprintf("at most %d characters", MaxSearchPrefix)}
	}
	return nil
}

// likePrefix is p as a LIKE pattern matching what starts with p: %, _ and \ escaped.
func likePrefix(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}

func pageLimit(n int) (int, error) {
	switch {
	case n < 0:
		return 0, &domain.ValidationError{Field: "limit", Reason: "bad_format", Detail: "not negative"}
	case n == 0:
		return DefaultSearchLimit, nil
	}
	return min(n, MaxSearchLimit), nil
}

// SearchUsers returns a page of the tenant's users whose nickname or login (in.By) starts with
// in.Prefix, in that field's order then by id, and the cursor of the next page ("" after the
// last): users who chose not to be found, who block the searcher, or who have no profile yet are
// left out. It reads MySQL, one range of the index (discoverable, field, user_id), with one
// primary-key look-up of a block per candidate. A prefix no login can start with (a character
// outside [a-z0-9_.-]) finds no login. Bad input is a *domain.ValidationError (field q, by,
// cursor or limit); an unprovisioned tenant wraps domain.ErrNotFound.
func (s *Store) SearchUsers(ctx context.Context, tenant domain.TenantID, in UserSearch) ([]UserHit, string, error) {
	limit, err := pageLimit(in.Limit)
	if err != nil {
		return nil, "", err
	}
	if err := checkPrefix(in.Prefix); err != nil {
		return nil, "", err
	}
	if err := checkUserID("user_id", in.Searcher); err != nil {
		return nil, "", err
	}
	col, prefix := "nickname", in.Prefix
	switch in.By {
	case SearchByNickname, "":
	case SearchByLogin:
		col = "login"
		if prefix = loginPrefix(prefix); prefix == "" {
			return nil, "", nil
		}
	default:
		return nil, "", &domain.ValidationError{Field: "by", Reason: "unknown", Detail: "nickname or login"}
	}
	t := DefaultTables()
	args := []any{int64(in.Searcher), likePrefix(prefix)}
	stmt := "SELECT u.user_id, u.login, u.nickname, u.avatar, u.signature, u.version, u.updated_at, " +
		"COALESCE(mine.blocked, 0) FROM " + q(t.Users) + " u FORCE INDEX (idx_im_users_" + col + ")" +
		" LEFT JOIN " + q(t.Relations) + " mine FORCE INDEX (PRIMARY) ON mine.user_id = ? AND mine.peer_id = u.user_id" +
		" WHERE u.discoverable = 1 AND u." + col + " LIKE ? ESCAPE '\\\\' AND u.nickname <> ''"
	if in.Cursor != "" {
		c, err := decodeCursor(in.Cursor)
		if err != nil {
			return nil, "", err
		}
		stmt += " AND (u." + col + " > ? OR (u." + col + " = ? AND u.user_id > ?))"
		args = append(args, c.Key, c.Key, c.ID)
	}
	stmt += " AND NOT EXISTS (SELECT 1 FROM " + q(t.Relations) + " b WHERE b.user_id = u.user_id AND b.peer_id = ? AND b.blocked = 1)" +
		" ORDER BY u." + col + ", u.user_id LIMIT ?"
	args = append(args, int64(in.Searcher), limit+1)
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, "", err
	}
	rows, err := db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, "", tenantdb.WrapErr("search users", err)
	}
	defer rows.Close()
	var hits []UserHit
	for rows.Next() {
		var h UserHit
		var id int64
		if err := rows.Scan(&id, &h.Login, &h.Nickname, &h.Avatar, &h.Signature, &h.Version, &h.UpdatedAt, &h.BlockedBySearcher); err != nil {
			return nil, "", tenantdb.WrapErr("search users", err)
		}
		h.ID = domain.UserID(id)
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, "", tenantdb.WrapErr("search users", err)
	}
	next := ""
	if len(hits) > limit {
		hits = hits[:limit]
		last := hits[limit-1]
		key := last.Nickname
		if col == "login" {
			key = last.Login
		}
		next = encodeCursor(key, int64(last.ID))
	}
	return hits, next, nil
}

// loginPrefix is p folded as a login is, or "" when no login can start with it.
func loginPrefix(p string) string {
	out := make([]byte, 0, len(p))
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case 'A' <= c && c <= 'Z':
			out = append(out, c+'a'-'A')
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_', c == '.', c == '-':
			out = append(out, c)
		default:
			return ""
		}
	}
	if len(out) > domain.MaxLoginLen {
		return ""
	}
	return string(out)
}

// SearchGroups returns a page of the tenant's discoverable groups (not dissolved) whose name
// starts with in.Prefix, by name then id, and the next page's cursor ("" after the last). It reads
// MySQL, one range of the index (discoverable, name, group_id). Errors as SearchUsers.
func (s *Store) SearchGroups(ctx context.Context, tenant domain.TenantID, in GroupSearch) ([]GroupHit, string, error) {
	limit, err := pageLimit(in.Limit)
	if err != nil {
		return nil, "", err
	}
	if err := checkPrefix(in.Prefix); err != nil {
		return nil, "", err
	}
	t := DefaultTables()
	args := []any{likePrefix(in.Prefix)}
	stmt := "SELECT g.group_id, g.name, g.avatar, g.intro, g.member_count, g.join_approval FROM " + q(t.Groups) +
		" g FORCE INDEX (idx_im_groups_name) WHERE g.discoverable = 1 AND g.name LIKE ? ESCAPE '\\\\' AND g.status = 'normal'"
	if in.Cursor != "" {
		c, err := decodeCursor(in.Cursor)
		if err != nil {
			return nil, "", err
		}
		stmt += " AND (g.name > ? OR (g.name = ? AND g.group_id > ?))"
		args = append(args, c.Key, c.Key, c.ID)
	}
	stmt += " ORDER BY g.name, g.group_id LIMIT ?"
	args = append(args, limit+1)
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, "", err
	}
	rows, err := db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, "", tenantdb.WrapErr("search groups", err)
	}
	defer rows.Close()
	var hits []GroupHit
	for rows.Next() {
		var h GroupHit
		var id int64
		if err := rows.Scan(&id, &h.Name, &h.Avatar, &h.Intro, &h.MemberCount, &h.JoinApproval); err != nil {
			return nil, "", tenantdb.WrapErr("search groups", err)
		}
		h.ID = domain.GroupID(id)
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, "", tenantdb.WrapErr("search groups", err)
	}
	next := ""
	if len(hits) > limit {
		hits = hits[:limit]
		next = encodeCursor(hits[limit-1].Name, int64(hits[limit-1].ID))
	}
	return hits, next, nil
}

// UsersByID returns the public profiles of ids (each once, at most MaxUsersByID of them, in the
// order asked) in one MySQL query; users without a profile are left out. A bad or missing id, or
// too many, is a *domain.ValidationError (field user_ids).
func (s *Store) UsersByID(ctx context.Context, tenant domain.TenantID, ids []domain.UserID) ([]User, error) {
	switch {
	case len(ids) == 0:
		return nil, &domain.ValidationError{Field: "user_ids", Reason: "required"}
	case len(ids) > MaxUsersByID:
		return nil, &domain.ValidationError{Field: "user_ids", Reason: "too_many", Detail: fmt.Sprintf("at most %d", MaxUsersByID)}
	}
	args := make([]any, 0, len(ids))
	seen := make(map[domain.UserID]bool, len(ids))
	for _, id := range ids {
		if id <= 0 {
			return nil, &domain.ValidationError{Field: "user_ids", Reason: "bad_format", Detail: "positive 64-bit user ids"}
		}
		if !seen[id] {
			seen[id] = true
			args = append(args, int64(id))
		}
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT "+userColList+" FROM "+q(DefaultTables().Users)+
		" WHERE user_id IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", ")+") AND nickname <> ''", args...)
	if err != nil {
		return nil, tenantdb.WrapErr("read users", err)
	}
	defer rows.Close()
	found := make(map[domain.UserID]User, len(args))
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, tenantdb.WrapErr("read users", err)
		}
		found[domain.UserID(u.id)] = User{ID: domain.UserID(u.id), Nickname: u.nickname, Avatar: u.avatar,
			Signature: u.signature, Version: u.version, UpdatedAt: u.updatedAt}
	}
	if err := rows.Err(); err != nil {
		return nil, tenantdb.WrapErr("read users", err)
	}
	out := make([]User, 0, len(found))
	for _, a := range args {
		if u, ok := found[domain.UserID(a.(int64))]; ok {
			out = append(out, u)
		}
	}
	return out, nil
}
