package business

import (
	"database/sql"
	"strconv"
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
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
	"invite_policy", "announce_policy", "mute_all", "discoverable", "announcement", "member_count", "status", "version",
	"created_at", "updated_at"}

var groupColList = strings.Join(groupCols, ", ")

func (g groupRow) values() []any {
	var ann any
	if g.announcement != "" {
		ann = g.announcement
	}
	return []any{g.id, g.topic, g.name, g.avatar, g.intro, g.owner, g.settings.JoinApproval,
		string(g.settings.WhoMayInvite), string(g.settings.WhoMayAnnounce), g.settings.MuteAll, g.settings.Discoverable, ann,
		g.memberCount, g.status, g.version, g.createdAt, g.updatedAt}
}

// scanGroup reads a row selected with groupColList.
func scanGroup(row interface{ Scan(...any) error }) (groupRow, error) {
	var g groupRow
	var invite, announce string
	var ann sql.NullString
	err := row.Scan(&g.id, &g.topic, &g.name, &g.avatar, &g.intro, &g.owner, &g.settings.JoinApproval,
		&invite, &announce, &g.settings.MuteAll, &g.settings.Discoverable, &ann, &g.memberCount, &g.status, &g.version,
		&g.createdAt, &g.updatedAt)
	g.settings.WhoMayInvite, g.settings.WhoMayAnnounce = domain.Role(invite), domain.Role(announce)
	g.announcement = ann.String
	return g, err
}

// foldGroup is domain.GroupState.Apply over a row.
func foldGroup(g groupRow, p any) groupRow {
	switch e := p.(type) {
	case *domain.GroupCreated:
		g = groupRow{id: g.id, topic: "grp" + strconv.FormatInt(g.id, 10), name: e.Name, avatar: e.Avatar,
			intro: e.Intro, owner: int64(e.Owner), settings: e.Settings, memberCount: e.MemberCount,
			status: GroupNormal, createdAt: readmodels.Millis(e.CreatedAt)}
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
	return g
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
