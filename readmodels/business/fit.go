package business

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
)

// A business event carries text the domain bounds (names, intros, request messages, profiles)
// and times it produces itself, so every value fits its column. An event an older build or
// another writer produced may not: a group name over 64 characters, bytes that are not UTF-8, a
// mute until the year 20000. MySQL refuses such a value, which would fail the whole batch and,
// retried alone, dead-letter the event and park its stream behind it: a group whose later events
// (joins, settings, dissolution) never reach the read model. Instead each row is fitted to its
// columns as it is folded: text is made valid UTF-8 (invalid bytes become U+FFFD) and cut to the
// column's width, times are moved into the range of DATETIME. The event store keeps the event
// as it was; the read model holds what its columns can.

// Column widths, in characters (VARCHAR) or bytes (TEXT), as migrations/mysql/00002_business.sql
// defines them.
const (
	widthGroupName      = 64
	widthURL            = 512 // avatar
	widthIntro          = 512
	widthPolicy         = 16 // invite_policy, announce_policy, role, status, request
	widthAnnouncement   = 65535
	widthRequestMessage = 256
	widthNickname       = 32
	widthSignature      = 128
)

// The range of a DATETIME(3) column.
var (
	minDatetime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxDatetime = time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC)
)

// fitChars returns s as valid UTF-8 of at most n characters.
func fitChars(s string, n int) string { return readmodels.FitChars(s, n) }

// fitBytes returns s as valid UTF-8 of at most n bytes, cut at a character boundary.
func fitBytes(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// fitTime moves t into the range of a DATETIME column; the zero time (NULL) stays zero.
func fitTime(t time.Time) time.Time {
	switch {
	case t.IsZero():
		return t
	case t.Before(minDatetime):
		return minDatetime
	case t.After(maxDatetime):
		return maxDatetime
	}
	return t
}

// fit returns g with every value within its column.
func (g groupRow) fit() groupRow {
	g.name = fitChars(g.name, widthGroupName)
	g.avatar = fitChars(g.avatar, widthURL)
	g.intro = fitChars(g.intro, widthIntro)
	g.settings.WhoMayInvite = domain.Role(fitChars(string(g.settings.WhoMayInvite), widthPolicy))
	g.settings.WhoMayAnnounce = domain.Role(fitChars(string(g.settings.WhoMayAnnounce), widthPolicy))
	g.announcement = fitBytes(g.announcement, widthAnnouncement)
	g.createdAt, g.updatedAt = fitTime(g.createdAt), fitTime(g.updatedAt)
	return g
}

// fit returns m with every value within its column.
func (m memberRow) fit() memberRow {
	m.role = domain.Role(fitChars(string(m.role), widthPolicy))
	m.requestMessage = fitChars(m.requestMessage, widthRequestMessage)
	m.mutedUntil, m.joinedAt, m.updatedAt = fitTime(m.mutedUntil), fitTime(m.joinedAt), fitTime(m.updatedAt)
	return m
}

// fit returns p with every value its rows hold within their columns.
func (p pair) fit() pair {
	p.message = fitChars(p.message, widthRequestMessage)
	p.friendsSince, p.updatedAt = fitTime(p.friendsSince), fitTime(p.updatedAt)
	return p
}

// fit returns u with every value within its column.
func (u userRow) fit() userRow {
	u.login = fitChars(u.login, domain.MaxLoginLen)
	u.nickname = fitChars(u.nickname, widthNickname)
	u.avatar = fitChars(u.avatar, widthURL)
	u.signature = fitChars(u.signature, widthSignature)
	u.updatedAt = fitTime(u.updatedAt)
	return u
}
