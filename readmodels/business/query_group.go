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

// Group is a group's profile as the read model holds it. A dissolved group keeps its profile with
// Status GroupDissolved and MemberCount 0.
type Group struct {
	ID           domain.GroupID
	Topic        string // "grp<id>"
	Name         string
	Avatar       string
	Intro        string
	Owner        domain.UserID
	MemberCount  int
	Announcement string // "" when there is none
	Status       string // GroupNormal or GroupDissolved
	Version      int64  // the group stream version the profile reflects
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Dissolved reports whether the group was dissolved.
func (g Group) Dissolved() bool { return g.Status == GroupDissolved }

// profilePairs is the profile entry of a group row.
func (g groupRow) profilePairs() []string {
	return []string{
		"group_id", strconv.FormatInt(g.id, 10),
		"topic", g.topic,
		"name", g.name,
		"avatar", g.avatar,
		"intro", g.intro,
		"owner_id", strconv.FormatInt(g.owner, 10),
		"member_count", strconv.Itoa(g.memberCount),
		"announcement", g.announcement,
		"status", g.status,
		"version", strconv.FormatInt(g.version, 10),
		"created_at", unixMillis(g.createdAt),
		"updated_at", unixMillis(g.updatedAt),
	}
}

// settingsPairs is the settings entry of a group row.
func (g groupRow) settingsPairs() []string {
	return []string{
		"join_approval", boolString(g.settings.JoinApproval),
		"invite_policy", string(g.settings.WhoMayInvite),
		"announce_policy", string(g.settings.WhoMayAnnounce),
		"mute_all", boolString(g.settings.MuteAll),
		"discoverable", boolString(g.settings.Discoverable),
	}
}

func boolString(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// fieldReader decodes a cached or loaded field map, remembering the first bad field.
type fieldReader struct {
	m   map[string]string
	err error
}

func (r *fieldReader) str(k string) string {
	v, ok := r.m[k]
	if !ok && r.err == nil {
		r.err = fmt.Errorf("cache entry without field %q", k)
	}
	return v
}

func (r *fieldReader) int(k string) int64 {
	n, err := strconv.ParseInt(r.str(k), 10, 64)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("cache field %q: %w", k, err)
	}
	return n
}

func (r *fieldReader) bool(k string) bool { return r.int(k) != 0 }

func (r *fieldReader) time(k string) time.Time {
	t, err := fromMillis(r.str(k))
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("cache field %q: %w", k, err)
	}
	return t
}

func decodeGroup(m map[string]string) (Group, error) {
	r := fieldReader{m: m}
	g := Group{ID: domain.GroupID(r.int("group_id")), Topic: r.str("topic"), Name: r.str("name"),
		Avatar: r.str("avatar"), Intro: r.str("intro"), Owner: domain.UserID(r.int("owner_id")),
		MemberCount: int(r.int("member_count")), Announcement: r.str("announcement"), Status: r.str("status"),
		Version: r.int("version"), CreatedAt: r.time("created_at"), UpdatedAt: r.time("updated_at")}
	return g, r.err
}

func decodeSettings(m map[string]string) (domain.GroupSettings, error) {
	r := fieldReader{m: m}
	s := domain.GroupSettings{JoinApproval: r.bool("join_approval"), WhoMayInvite: domain.Role(r.str("invite_policy")),
		WhoMayAnnounce: domain.Role(r.str("announce_policy")), MuteAll: r.bool("mute_all"),
		Discoverable: r.bool("discoverable")} // an entry written before the field is refilled
	return s, r.err
}

// Group returns the profile of group gid (cache entry group:{gid}:profile). A group the read
// model does not hold wraps domain.ErrNotFound; a bad id wraps domain.ErrInvalid.
func (s *Store) Group(ctx context.Context, tenant domain.TenantID, gid domain.GroupID) (Group, error) {
	if err := checkGroupID(gid); err != nil {
		return Group{}, err
	}
	key := s.keyspace(tenant).groupProfile(int64(gid))
	return cachedHash(ctx, s, tenant, key, func(ctx context.Context) ([]string, error) {
		g, err := s.loadGroup(ctx, tenant, int64(gid))
		return g.profilePairs(), err
	}, decodeGroup)
}

// Settings returns the settings of group gid (cache entry group:{gid}:settings). Errors as Group.
func (s *Store) Settings(ctx context.Context, tenant domain.TenantID, gid domain.GroupID) (domain.GroupSettings, error) {
	if err := checkGroupID(gid); err != nil {
		return domain.GroupSettings{}, err
	}
	key := s.keyspace(tenant).groupSettings(int64(gid))
	return cachedHash(ctx, s, tenant, key, func(ctx context.Context) ([]string, error) {
		g, err := s.loadGroup(ctx, tenant, int64(gid))
		return g.settingsPairs(), err
	}, decodeSettings)
}

// MemberCount returns how many members group gid has: 0 once dissolved. Errors as Group.
func (s *Store) MemberCount(ctx context.Context, tenant domain.TenantID, gid domain.GroupID) (int, error) {
	g, err := s.Group(ctx, tenant, gid)
	return g.MemberCount, err
}

// GroupSize is MemberCount for readmodels/hot's GroupSizer, which decides from it whether a
// group's messages are cached.
func (s *Store) GroupSize(ctx context.Context, tenant domain.TenantID, groupID int64) (int, error) {
	return s.MemberCount(ctx, tenant, domain.GroupID(groupID))
}

// loadGroup reads a group row from MySQL.
func (s *Store) loadGroup(ctx context.Context, tenant domain.TenantID, gid int64) (groupRow, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return groupRow{}, err
	}
	g, err := scanGroup(db.QueryRowContext(ctx, "SELECT "+groupColList+" FROM "+q(DefaultTables().Groups)+" WHERE group_id = ?", gid))
	if errors.Is(err, sql.ErrNoRows) {
		return groupRow{}, fmt.Errorf("group %d: %w", gid, domain.ErrNotFound)
	}
	return g, tenantdb.WrapErr("read group", err)
}

func checkGroupID(gid domain.GroupID) error {
	if gid <= 0 {
		return &domain.ValidationError{Field: "group_id", Reason: "bad_format", Detail: "a positive 64-bit number"}
	}
	return nil
}

func checkUserID(field string, uid domain.UserID) error {
	if uid <= 0 {
		return &domain.ValidationError{Field: field, Reason: "bad_format", Detail: "a positive 64-bit number"}
	}
	return nil
}
