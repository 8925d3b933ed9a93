package domain_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

func TestMembershipLifecycle(t *testing.T) {
	t.Parallel()
	w := newGroupWorld(t)
	owner := func() domain.MembershipState { return w.m(t, uOwner) }
	count := w.g.MemberCount()

	// A join request is rejected, asked again and approved.
	w.do(t)(w.g.RejectJoin(as(uAdmin), w.m(t, uAdmin), w.m(t, uRequester), t0))
	if s := w.m(t, uRequester).Status(); s != domain.StatusRejected {
		t.Fatalf("after reject: %s", s)
	}
	w.do(t)(w.g.RequestJoin(as(uRequester), w.m(t, uRequester), "please", t0))
	if m := w.m(t, uRequester); m.Status() != domain.StatusRequested || m.RequestMessage() != "please" {
		t.Fatalf("after request: %s %q", m.Status(), m.RequestMessage())
	}
	w.do(t)(w.g.ApproveJoin(as(uAdmin), w.m(t, uAdmin), w.m(t, uRequester), 0, t0))
	if m := w.m(t, uRequester); !m.IsMember() || m.Role() != domain.RoleMember || m.RequestMessage() != "" {
		t.Fatalf("after approve: %+v", m)
	}
	count++

	// The invited user accepts.
	if by := w.m(t, uInvited).InvitedBy(); by != uOwner {
		t.Fatalf("invited by %d", by)
	}
	w.do(t)(w.g.AcceptInvite(as(uInvited), w.m(t, uInvited), 0, t0))
	count++

	// A banned user stays out until unbanned, then may ask again.
	if _, err := w.g.RequestJoin(as(uBanned), w.m(t, uBanned), "", t0); reasonOf(err) != domain.ReasonBanned {
		t.Fatalf("banned request: %v", err)
	}
	w.do(t)(w.g.Unban(as(uOwner), owner(), w.m(t, uBanned), t0))
	if m := w.m(t, uBanned); m.Banned() || m.Status() != domain.StatusRemoved {
		t.Fatalf("after unban: %+v", m)
	}
	w.do(t)(w.g.RequestJoin(as(uBanned), w.m(t, uBanned), "sorry", t0))

	// Leaving resets role and mute; joining again starts clean.
	w.do(t)(w.g.Leave(as(uMuted), w.m(t, uMuted), t0))
	count--
	if m := w.m(t, uMuted); m.Status() != domain.StatusLeft || m.Role() != "" || !m.MutedUntil().IsZero() {
		t.Fatalf("after leave: %+v", m)
	}
	w.do(t)(w.g.Invite(as(uMember), w.m(t, uMember), w.m(t, uMuted), t0))
	w.do(t)(w.g.Join(as(uMuted), w.m(t, uMuted), 0, t0)) // an invitation lets the user past approval
	count++
	if m := w.m(t, uMuted); !m.IsMember() || m.MutedAt(t0) || !m.JoinedAt().Equal(t0) {
		t.Fatalf("after rejoin: %+v", m)
	}
	if err := domain.CanPost(w.g, w.m(t, uMuted), t0); err != nil {
		t.Fatalf("rejoined member cannot post: %v", err)
	}

	// Roles go up and down; the owner transfers and may then leave.
	w.do(t)(w.g.SetRole(as(uOwner), owner(), w.m(t, uAdmin2), domain.RoleMember, t0))
	if evs, err := w.g.SetRole(as(uOwner), owner(), w.m(t, uAdmin2), domain.RoleMember, t0); err != nil || evs != nil {
		t.Fatalf("same role again: %v %v", evs, err)
	}
	w.do(t)(w.g.TransferOwnership(as(uOwner), owner(), w.m(t, uAdmin), t0))
	if _, err := w.g.Leave(as(uAdmin), w.m(t, uAdmin), t0); reasonOf(err) != domain.ReasonOwnerCannotLeave {
		t.Fatalf("new owner leaves: %v", err)
	}
	w.do(t)(w.g.Leave(as(uOwner), owner(), t0))
	count--
	if w.g.Owner() != uAdmin || w.g.MemberCount() != count {
		t.Fatalf("owner %d count %d, want %d %d", w.g.Owner(), w.g.MemberCount(), uAdmin, count)
	}

	// Every membership touched keeps the identity of its own stream.
	for u, m := range w.ms {
		if m.Version() == 0 {
			continue
		}
		if m.User() != u || m.Group() != groupID || m.Tenant() != tenantA || m.StreamID() != domain.MembershipStreamID(groupID, u) {
			t.Errorf("identity of %d: %+v", u, m)
		}
	}
}

func TestMuteRules(t *testing.T) {
	t.Parallel()
	w := newGroupWorld(t)
	owner, admin := w.m(t, uOwner), w.m(t, uAdmin)
	if until := w.m(t, uMuted).MutedUntil(); !until.Equal(t0.Add(time.Hour)) {
		t.Fatalf("muted until %v", until)
	}
	// Posting is refused until the mute ends, and allowed from its end on.
	for _, c := range []struct {
		at   time.Time
		want string
	}{{t0, domain.ReasonMuted}, {t0.Add(59 * time.Minute), domain.ReasonMuted}, {t0.Add(time.Hour), ""}} {
		if got := reasonOf(domain.CanPost(w.g, w.m(t, uMuted), c.at)); got != c.want {
			t.Errorf("post at %v: %q, want %q", c.at, got, c.want)
		}
	}
	if _, err := w.g.Mute(as(uAdmin), admin, w.m(t, uTarget), t0, t0); reasonOf(err) != "invalid:until:in_past" {
		t.Errorf("mute until now: %v", err)
	}
	if evs, err := w.g.Mute(as(uAdmin), admin, w.m(t, uTarget), time.Time{}, t0); err != nil || evs != nil {
		t.Errorf("unmute of an unmuted member: %v %v", evs, err)
	}
	// Zero until lifts the mute; the event carries no until at all.
	evs, err := w.g.Mute(as(uAdmin), admin, w.m(t, uMuted), time.Time{}, t0)
	envs := commit(t, tenantA, evs, err, &w.g, w.ms[uMuted])
	if strings.Contains(string(envs[0].Payload), "until") {
		t.Errorf("unmute payload carries until: %s", envs[0].Payload)
	}
	if err := domain.CanPost(w.g, w.m(t, uMuted), t0); err != nil {
		t.Errorf("unmuted member cannot post: %v", err)
	}
	// The owner mutes an admin; the admin then cannot post even under no mute-all.
	w.do(t)(w.g.Mute(as(uOwner), owner, w.m(t, uAdmin2), t0.Add(time.Minute), t0))
	if got := reasonOf(domain.CanPost(w.g, w.m(t, uAdmin2), t0)); got != domain.ReasonMuted {
		t.Errorf("muted admin posts: %q", got)
	}
}

func TestMembershipInvalidInput(t *testing.T) {
	t.Parallel()
	w := newGroupWorld(t)
	owner := w.m(t, uOwner)
	if _, err := w.g.SetRole(as(uOwner), owner, w.m(t, uTarget), domain.RoleOwner, t0); reasonOf(err) != "invalid:role:bad_value" {
		t.Errorf("set role owner: %v", err)
	}
	if _, err := w.g.SetRole(as(uOwner), owner, w.m(t, uTarget), "root", t0); reasonOf(err) != "invalid:role:bad_value" {
		t.Errorf("set unknown role: %v", err)
	}
	long := strings.Repeat("字", domain.MaxJoinMessageLen+1)
	if _, err := w.g.RequestJoin(as(uOutsider), w.m(t, uOutsider), long, t0); reasonOf(err) != "invalid:message:too_long" {
		t.Errorf("long join message: %v", err)
	}
	// A membership of another group or user is a caller bug, reported as invalid input.
	other, _ := domain.NewMembershipState(tenantA, groupID+1, uOwner)
	if _, err := w.g.Dissolve(as(uOwner), other, t0); reasonOf(err) != "invalid:membership:mismatch" {
		t.Errorf("membership of another group: %v", err)
	}
	if _, err := w.g.Dissolve(as(uOwner), w.m(t, uAdmin), t0); reasonOf(err) != "invalid:membership:mismatch" {
		t.Errorf("membership of another user: %v", err)
	}
	foreign, _ := domain.NewMembershipState(tenantB, groupID, uTarget)
	if _, err := w.g.Remove(as(uOwner), owner, foreign, false, t0); reasonOf(err) != domain.ReasonTenantMismatch {
		t.Errorf("target of another tenant: %v", err)
	}
	for _, c := range []struct {
		tenant domain.TenantID
		g      domain.GroupID
		u      domain.UserID
		want   string
	}{{domain.TenantID{}, 1, 1, "invalid:tenant_id:required"}, {tenantA, 0, 1, "invalid:group_id:bad_format"}, {tenantA, 1, -1, "invalid:user_id:bad_format"}} {
		if _, err := domain.NewMembershipState(c.tenant, c.g, c.u); reasonOf(err) != c.want {
			t.Errorf("NewMembershipState(%v,%d,%d): %q, want %q", c.tenant, c.g, c.u, reasonOf(err), c.want)
		}
	}
}

func TestMembershipFoldRoundTrip(t *testing.T) {
	t.Parallel()
	g, _ := domain.NewGroupState(tenantA, 700)
	w := &groupWorld{g: g, ms: map[domain.UserID]*domain.MembershipState{}}
	var log []domain.Envelope
	const u domain.UserID = 5
	step := func(evs []domain.PendingEvent, err error) {
		t.Helper()
		states := []aggregate{&w.g}
		for _, s := range w.ms {
			states = append(states, s)
		}
		for _, e := range commit(t, tenantA, evs, err, states...) {
			if e.StreamID == domain.MembershipStreamID(700, u) {
				log = append(log, e)
			}
		}
	}
	profile, _ := domain.NewGroupProfile("g", "", "")
	settings := domain.DefaultGroupSettings()
	settings.JoinApproval = true
	w.m(t, 1)
	step(w.g.Create(as(1), profile, settings, t0))
	step(w.g.RequestJoin(as(u), w.m(t, u), "hi", t0))
	step(w.g.ApproveJoin(as(1), w.m(t, 1), w.m(t, u), 0, t0))
	step(w.g.SetRole(as(1), w.m(t, 1), w.m(t, u), domain.RoleAdmin, t0))
	step(w.g.Mute(as(1), w.m(t, 1), w.m(t, u), t0.Add(time.Hour), t0))
	step(w.g.Remove(as(1), w.m(t, 1), w.m(t, u), true, t0))
	step(w.g.Unban(as(1), w.m(t, 1), w.m(t, u), t0))
	step(w.g.Invite(as(1), w.m(t, 1), w.m(t, u), t0))
	step(w.g.AcceptInvite(as(u), w.m(t, u), 0, t0))

	wantTypes := []domain.EventType{domain.EventMemberJoinRequested, domain.EventMemberJoinApproved,
		domain.EventMemberJoined, domain.EventMemberRoleSet, domain.EventMemberMuted, domain.EventMemberRemoved,
		domain.EventMemberUnbanned, domain.EventMemberInvited, domain.EventMemberJoined}
	var gotTypes []domain.EventType
	for i, e := range log {
		gotTypes = append(gotTypes, e.EventType)
		if e.StreamVersion != int64(i+1) {
			t.Errorf("event %d at version %d", i, e.StreamVersion)
		}
	}
	if !reflect.DeepEqual(gotTypes, wantTypes) {
		t.Fatalf("stream %v, want %v", gotTypes, wantTypes)
	}
	folded, err := domain.FoldMembership(tenantA, 700, u, toWire(t, log))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(folded, *w.ms[u]) {
		t.Errorf("fold differs:\n%+v\n%+v", folded, *w.ms[u])
	}
	if !folded.IsMember() || folded.Role() != domain.RoleMember || folded.Banned() || folded.Version() != 9 {
		t.Errorf("folded %+v", folded)
	}
	if w.g.MemberCount() != 2 {
		t.Errorf("member count %d, want 2", w.g.MemberCount())
	}
	// A group event does not fold into a membership.
	m, _ := domain.NewMembershipState(tenantA, 700, u)
	groupEnv := log[0]
	groupEnv.EventType = domain.EventGroupDissolved
	if err := m.Apply(groupEnv); !errors.Is(err, domain.ErrStreamMismatch) {
		t.Errorf("group event applied to a membership: %v", err)
	}
}
