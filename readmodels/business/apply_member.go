package business

import (
	"database/sql"
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
)

// memberRow is one im_group_members row. Zero times are NULL in the table.
type memberRow struct {
	group          int64
	user           int64
	role           domain.Role
	status         domain.MembershipStatus
	mutedUntil     time.Time
	banned         bool
	invitedBy      int64
	requestMessage string
	joinedAt       time.Time
	version        int64
	updatedAt      time.Time
}

var memberCols = []string{"group_id", "user_id", "role", "status", "muted_until", "banned", "invited_by",
	"request_message", "joined_at", "version", "updated_at"}

var memberColList = strings.Join(memberCols, ", ")

func (m memberRow) values() []any {
	return []any{m.group, m.user, string(m.role), string(m.status), nullTime(m.mutedUntil), m.banned,
		m.invitedBy, m.requestMessage, nullTime(m.joinedAt), m.version, m.updatedAt}
}

// scanMember reads a row selected with memberColList.
func scanMember(row interface{ Scan(...any) error }) (memberRow, error) {
	var m memberRow
	var role, status string
	var muted, joined sql.NullTime
	err := row.Scan(&m.group, &m.user, &role, &status, &muted, &m.banned, &m.invitedBy,
		&m.requestMessage, &joined, &m.version, &m.updatedAt)
	m.role, m.status = domain.Role(role), domain.MembershipStatus(status)
	m.mutedUntil, m.joinedAt = muted.Time, joined.Time
	return m, err
}

// isMember reports whether the row is a current member (the group's status aside).
func (m memberRow) isMember() bool { return m.status == domain.StatusMember }

// moderates reports whether the row belongs in the admins entry: a member with role owner or admin.
func (m memberRow) moderates() bool {
	return m.isMember() && (m.role == domain.RoleOwner || m.role == domain.RoleAdmin)
}

// mute is what the muted entry holds for the row: the mute end of a member, else zero.
func (m memberRow) mute() time.Time {
	if !m.isMember() {
		return time.Time{}
	}
	return m.mutedUntil
}

// foldMember is domain.MembershipState.Apply over a row.
func foldMember(m memberRow, p any) memberRow {
	switch e := p.(type) {
	case *domain.MemberInvited:
		m.status, m.invitedBy = domain.StatusInvited, int64(e.By)
	case *domain.MemberJoinRequested:
		m.status, m.requestMessage = domain.StatusRequested, e.Message
	case *domain.MemberJoinApproved:
		// The decision record; member.joined.v1 follows and makes the user a member.
	case *domain.MemberJoinRejected:
		m.status, m.requestMessage = domain.StatusRejected, ""
	case *domain.MemberJoined:
		m.status, m.role, m.joinedAt = domain.StatusMember, e.Role, readmodels.Millis(e.JoinedAt)
		m.mutedUntil, m.invitedBy, m.requestMessage = time.Time{}, 0, ""
	case *domain.MemberLeft:
		m.status, m.role, m.mutedUntil = domain.StatusLeft, "", time.Time{}
	case *domain.MemberRemoved:
		m.status, m.role, m.mutedUntil, m.banned = domain.StatusRemoved, "", time.Time{}, e.Ban
	case *domain.MemberUnbanned:
		m.banned = false
	case *domain.MemberRoleSet:
		m.role = e.Role
	case *domain.MemberMuted:
		m.mutedUntil = time.Time{}
		if e.Muted {
			m.mutedUntil = readmodels.Millis(e.Until)
		}
	}
	return m
}

// nullTime is t for the driver, NULL when zero.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}
