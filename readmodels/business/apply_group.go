package business

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Group statuses as stored in im_groups.status and the profile cache.
const (
	GroupNormal    = "normal"
	GroupDissolved = "dissolved"
)

// groupRow is one im_groups row.
type groupRow struct {
	id           int64
	topic        string
	name         string
	avatar       string
	intro        string
	owner        int64
	settings     domain.GroupSettings
	announcement string
	memberCount  int
	status       string
	version      int64
	createdAt    time.Time
	updatedAt    time.Time
}

var groupCols = []string{"group_id", "topic", "name", "avatar", "intro", "owner_id", "join_approval",
	"invite_policy", "announce_policy", "mute_all", "announcement", "member_count", "status", "version",
	"created_at", "updated_at"}

var groupColList = strings.Join(groupCols, ", ")

func (g groupRow) values() []any {
	var ann any
	if g.announcement != "" {
		ann = g.announcement
	}
	return []any{g.id, g.topic, g.name, g.avatar, g.intro, g.owner, g.settings.JoinApproval,
		string(g.settings.WhoMayInvite), string(g.settings.WhoMayAnnounce), g.settings.MuteAll, ann,
		g.memberCount, g.status, g.version, g.createdAt, g.updatedAt}
}

// scanGroup reads a row selected with groupColList.
func scanGroup(row interface{ Scan(...any) error }) (groupRow, error) {
	var g groupRow
	var invite, announce string
	var ann sql.NullString
	err := row.Scan(&g.id, &g.topic, &g.name, &g.avatar, &g.intro, &g.owner, &g.settings.JoinApproval,
		&invite, &announce, &g.settings.MuteAll, &ann, &g.memberCount, &g.status, &g.version,
		&g.createdAt, &g.updatedAt)
	g.settings.WhoMayInvite, g.settings.WhoMayAnnounce = domain.Role(invite), domain.Role(announce)
	g.announcement = ann.String
	return g, err
}

// lockGroup reads and locks the group row; found is false when there is none.
func (a *applier) lockGroup(ctx context.Context, gid int64) (g groupRow, found bool, err error) {
	g, err = scanGroup(a.tx.QueryRowContext(ctx, "SELECT "+groupColList+" FROM "+q(a.t.Groups)+" WHERE group_id = ? FOR UPDATE", gid))
	if errors.Is(err, sql.ErrNoRows) {
		return groupRow{}, false, nil
	}
	if err != nil {
		return groupRow{}, false, tenantdb.WrapErr("apply: read group", err)
	}
	return g, true, nil
}

// applyGroup folds a group-stream event into im_groups as domain.GroupState.Apply does. Every
// applied event makes the profile entry stale (it carries the version); settings, membership and
// dissolution changes make their entries stale too.
func (a *applier) applyGroup(ctx context.Context, o op) error {
	gid := groupOf(o.payload)
	old, found, err := a.lockGroup(ctx, gid)
	if err != nil {
		return err
	}
	if found && old.version >= o.env.StreamVersion {
		return nil
	}
	if _, isCreate := o.payload.(*domain.GroupCreated); !found && !isCreate {
		return fmt.Errorf("group %d: %s before group.created.v1: %w", gid, o.env.EventType, domain.ErrNotFound)
	}
	g := old
	switch e := o.payload.(type) {
	case *domain.GroupCreated:
		topic, err := domain.GroupTopic(gid)
		if err != nil {
			return err
		}
		g = groupRow{id: gid, topic: topic.String(), name: e.Name, avatar: e.Avatar, intro: e.Intro,
			owner: int64(e.Owner), settings: e.Settings, memberCount: e.MemberCount, status: GroupNormal,
			createdAt: readmodels.Millis(e.CreatedAt)}
	case *domain.GroupProfileUpdated:
		g.name, g.avatar, g.intro = e.Name, e.Avatar, e.Intro
	case *domain.GroupSettingsUpdated:
		g.settings = e.Settings
	case *domain.GroupAnnouncementUpdated:
		g.announcement = e.Text
	case *domain.GroupOwnershipTransferred:
		g.owner = int64(e.To)
	case *domain.GroupDissolved:
		g.status, g.memberCount = GroupDissolved, 0
	case *domain.GroupMemberCountChanged:
		if g.status != GroupDissolved {
			g.memberCount = e.MemberCount
		}
	}
	g.version, g.updatedAt = o.env.StreamVersion, o.at()
	if err := a.writeRow(ctx, found, a.t.Groups, groupCols, g.values(), 1); err != nil {
		return err
	}
	a.touch(a.ks.groupProfile(gid))
	if !found || g.settings != old.settings {
		a.touch(a.ks.groupSettings(gid))
	}
	if !found || g.status != old.status {
		a.touch(a.ks.groupAll(gid)...)
	}
	return nil
}

// groupOf returns the group id of a group-stream payload (0 for any other).
func groupOf(p any) int64 {
	switch e := p.(type) {
	case *domain.GroupCreated:
		return int64(e.GroupID)
	case *domain.GroupProfileUpdated:
		return int64(e.GroupID)
	case *domain.GroupSettingsUpdated:
		return int64(e.GroupID)
	case *domain.GroupAnnouncementUpdated:
		return int64(e.GroupID)
	case *domain.GroupOwnershipTransferred:
		return int64(e.GroupID)
	case *domain.GroupDissolved:
		return int64(e.GroupID)
	case *domain.GroupMemberCountChanged:
		return int64(e.GroupID)
	}
	return 0
}
