package domain_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

// The users of the matrix world.
const (
	uOwner     domain.UserID  = 1
	uAdmin     domain.UserID  = 2
	uMember    domain.UserID  = 3
	uMuted     domain.UserID  = 4
	uOutsider  domain.UserID  = 5
	uRemoved   domain.UserID  = 6
	uBanned    domain.UserID  = 7 // removed with a ban: blocked from the group
	uInvited   domain.UserID  = 8
	uRequester domain.UserID  = 9
	uTarget    domain.UserID  = 10 // a plain member that commands act upon
	uAdmin2    domain.UserID  = 11 // an admin that commands act upon
	uStranger  domain.UserID  = 12 // a user with no relation to the group, as a target
	groupID    domain.GroupID = 100
)

// groupWorld is a group and the memberships of its users, built by running commands.
type groupWorld struct {
	g  domain.GroupState
	ms map[domain.UserID]*domain.MembershipState
}

func (w *groupWorld) m(t *testing.T, u domain.UserID) domain.MembershipState {
	t.Helper()
	if s, ok := w.ms[u]; ok {
		return *s
	}
	s, err := domain.NewMembershipState(w.g.Tenant(), w.g.ID(), u)
	if err != nil {
		t.Fatal(err)
	}
	w.ms[u] = &s
	return s
}

// do returns a function that commits a decision to the world's states, for use as
// w.do(t)(w.g.Join(...)).
func (w *groupWorld) do(t *testing.T) func([]domain.PendingEvent, error) {
	t.Helper()
	return func(evs []domain.PendingEvent, err error) {
		t.Helper()
		states := []aggregate{&w.g}
		for _, s := range w.ms {
			states = append(states, s)
		}
		commit(t, w.g.Tenant(), evs, err, states...)
	}
}

func (w *groupWorld) clone() *groupWorld {
	c := &groupWorld{g: w.g, ms: make(map[domain.UserID]*domain.MembershipState, len(w.ms))}
	for u, s := range w.ms {
		cp := *s
		c.ms[u] = &cp
	}
	return c
}

func as(u domain.UserID) domain.Principal { return domain.Principal{Tenant: tenantA, User: u} }

// newGroupWorld builds group 100 of tenant acme with join approval on: an owner, two admins, two
// plain members, a member muted for an hour, a removed and a banned user, a pending invitation
// and a pending join request.
func newGroupWorld(t *testing.T) *groupWorld {
	t.Helper()
	g, err := domain.NewGroupState(tenantA, groupID)
	if err != nil {
		t.Fatal(err)
	}
	w := &groupWorld{g: g, ms: map[domain.UserID]*domain.MembershipState{}}
	profile, _ := domain.NewGroupProfile("Night shift", "https://cdn.example/g.png", "ops")
	settings := domain.DefaultGroupSettings()
	settings.JoinApproval = true
	w.m(t, uOwner)
	w.do(t)(w.g.Create(as(uOwner), profile, settings, t0))
	for _, u := range []domain.UserID{uAdmin, uMember, uMuted, uRemoved, uBanned, uTarget, uAdmin2, uInvited} {
		w.do(t)(w.g.Invite(as(uOwner), w.m(t, uOwner), w.m(t, u), t0))
		if u != uInvited {
			w.do(t)(w.g.AcceptInvite(as(u), w.m(t, u), 0, t0))
		}
	}
	w.do(t)(w.g.RequestJoin(as(uRequester), w.m(t, uRequester), "let me in", t0))
	for _, u := range []domain.UserID{uAdmin, uAdmin2} {
		w.do(t)(w.g.SetRole(as(uOwner), w.m(t, uOwner), w.m(t, u), domain.RoleAdmin, t0))
	}
	w.do(t)(w.g.Mute(as(uOwner), w.m(t, uOwner), w.m(t, uMuted), t0.Add(time.Hour), t0))
	w.do(t)(w.g.Remove(as(uOwner), w.m(t, uOwner), w.m(t, uRemoved), false, t0))
	w.do(t)(w.g.Remove(as(uOwner), w.m(t, uOwner), w.m(t, uBanned), true, t0))
	w.m(t, uOutsider)
	w.m(t, uStranger)
	return w
}

// matrixActor is one column of the matrix: who issues the command.
type matrixActor struct {
	name string
	p    domain.Principal
}

var matrixActors = []matrixActor{
	{"owner", as(uOwner)}, {"admin", as(uAdmin)}, {"member", as(uMember)}, {"muted", as(uMuted)},
	{"non_member", as(uOutsider)}, {"removed", as(uRemoved)}, {"banned", as(uBanned)},
	{"invited", as(uInvited)}, {"requester", as(uRequester)},
	{"other_tenant", domain.Principal{Tenant: tenantB, User: uOwner}},
}

// actorState is the membership the command handler would load for p: its own tenant's stream.
func (w *groupWorld) actorState(t *testing.T, p domain.Principal) domain.MembershipState {
	t.Helper()
	if p.Tenant != w.g.Tenant() {
		m, err := domain.NewMembershipState(p.Tenant, w.g.ID(), p.User)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	return w.m(t, p.User)
}

type command func(t *testing.T, w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error)

type matrixRow struct {
	name    string
	setup   func(s *domain.GroupSettings) // changes the settings before the command, when set
	cmd     command
	okTypes []domain.EventType // the events of a successful decision
	want    map[string]string  // actor name -> stable reason; "" is success
}

// reasons builds a row's expectations: the owner/admin/member/muted columns as given, every
// non-member column not_member, other_tenant tenant_mismatch, then overrides.
func reasons(owner, admin, member, muted string, overrides ...string) map[string]string {
	m := map[string]string{"owner": owner, "admin": admin, "member": member, "muted": muted,
		"non_member": domain.ReasonNotMember, "removed": domain.ReasonNotMember, "banned": domain.ReasonNotMember,
		"invited": domain.ReasonNotMember, "requester": domain.ReasonNotMember, "other_tenant": domain.ReasonTenantMismatch}
	for i := 0; i+1 < len(overrides); i += 2 {
		m[overrides[i]] = overrides[i+1]
	}
	return m
}

// joiners is reasons for commands a user issues about their own way in.
func joiners(nonMember, removed, invited, requester string) map[string]string {
	return map[string]string{"owner": domain.ReasonAlreadyMember, "admin": domain.ReasonAlreadyMember,
		"member": domain.ReasonAlreadyMember, "muted": domain.ReasonAlreadyMember, "non_member": nonMember,
		"removed": removed, "banned": domain.ReasonBanned, "invited": invited, "requester": requester,
		"other_tenant": domain.ReasonTenantMismatch}
}

func on(target domain.UserID, f func(w *groupWorld, p domain.Principal, me, target domain.MembershipState) ([]domain.PendingEvent, error)) command {
	return func(t *testing.T, w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
		return f(w, p, me, w.m(t, target))
	}
}

func remove(target domain.UserID, ban bool) command {
	return on(target, func(w *groupWorld, p domain.Principal, me, tg domain.MembershipState) ([]domain.PendingEvent, error) {
		return w.g.Remove(p, me, tg, ban, t0)
	})
}

func mute(target domain.UserID) command {
	return on(target, func(w *groupWorld, p domain.Principal, me, tg domain.MembershipState) ([]domain.PendingEvent, error) {
		return w.g.Mute(p, me, tg, t0.Add(10*time.Minute), t0)
	})
}

func invite(target domain.UserID) command {
	return on(target, func(w *groupWorld, p domain.Principal, me, tg domain.MembershipState) ([]domain.PendingEvent, error) {
		return w.g.Invite(p, me, tg, t0)
	})
}

func approve(target domain.UserID) command {
	return on(target, func(w *groupWorld, p domain.Principal, me, tg domain.MembershipState) ([]domain.PendingEvent, error) {
		return w.g.ApproveJoin(p, me, tg, 0, t0)
	})
}

func announce(w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
	return w.g.UpdateAnnouncement(p, me, "standup at 9", t0)
}

// post runs CanPost, which decides no events.
func post(_ *testing.T, w *groupWorld, _ domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
	return nil, domain.CanPost(w.g, me, t0)
}

var (
	ok                = ""
	notAdmin          = domain.ReasonNotAdmin
	notOwner          = domain.ReasonNotOwner
	countChanged      = domain.EventGroupMemberCountChanged
	approvalOff       = func(s *domain.GroupSettings) { s.JoinApproval = false }
	muteAll           = func(s *domain.GroupSettings) { s.MuteAll = true }
	membersAnnounce   = func(s *domain.GroupSettings) { s.WhoMayAnnounce = domain.RoleMember }
	adminsInvite      = func(s *domain.GroupSettings) { s.WhoMayInvite = domain.RoleAdmin }
	ownerInvites      = func(s *domain.GroupSettings) { s.WhoMayInvite = domain.RoleOwner }
	memberCountEvents = []domain.EventType{domain.EventMemberJoined, countChanged}
)

// matrixRows are the rows of the permission matrix: group administration, ways in, moderation.
func matrixRows() []matrixRow {
	return append(append(adminRows(), joinRows()...), moderationRows()...)
}

func adminRows() []matrixRow {
	newProfile, _ := domain.NewGroupProfile("Day shift", "", "")
	return []matrixRow{
		{name: "update_profile", cmd: func(_ *testing.T, w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.UpdateProfile(p, me, newProfile, t0)
		}, okTypes: []domain.EventType{domain.EventGroupProfileUpdated}, want: reasons(ok, ok, notAdmin, notAdmin)},
		{name: "update_settings", cmd: func(_ *testing.T, w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
			s := w.g.Settings()
			s.MuteAll = true
			return w.g.UpdateSettings(p, me, s, t0)
		}, okTypes: []domain.EventType{domain.EventGroupSettingsUpdated}, want: reasons(ok, ok, notAdmin, notAdmin)},
		{name: "announce_admins", cmd: func(_ *testing.T, w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
			return announce(w, p, me)
		}, okTypes: []domain.EventType{domain.EventGroupAnnouncementUpdated}, want: reasons(ok, ok, notAdmin, notAdmin)},
		{name: "announce_members", setup: membersAnnounce, cmd: func(_ *testing.T, w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
			return announce(w, p, me)
		}, okTypes: []domain.EventType{domain.EventGroupAnnouncementUpdated}, want: reasons(ok, ok, ok, domain.ReasonMuted)},
		{name: "transfer_ownership", cmd: on(uTarget, func(w *groupWorld, p domain.Principal, me, tg domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.TransferOwnership(p, me, tg, t0)
		}), okTypes: []domain.EventType{domain.EventGroupOwnershipTransferred, domain.EventMemberRoleSet, domain.EventMemberRoleSet},
			want: reasons(ok, notOwner, notOwner, notOwner)},
		{name: "transfer_to_non_member", cmd: on(uStranger, func(w *groupWorld, p domain.Principal, me, tg domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.TransferOwnership(p, me, tg, t0)
		}), want: reasons(domain.ReasonTargetNotMember, notOwner, notOwner, notOwner)},
		{name: "dissolve", cmd: func(_ *testing.T, w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.Dissolve(p, me, t0)
		}, okTypes: []domain.EventType{domain.EventGroupDissolved}, want: reasons(ok, notOwner, notOwner, notOwner)},
	}
}

func joinRows() []matrixRow {
	return []matrixRow{
		{name: "invite_members_may", cmd: invite(uStranger), okTypes: []domain.EventType{domain.EventMemberInvited},
			want: reasons(ok, ok, ok, ok)},
		{name: "invite_admins_may", setup: adminsInvite, cmd: invite(uStranger), okTypes: []domain.EventType{domain.EventMemberInvited},
			want: reasons(ok, ok, notAdmin, notAdmin)},
		{name: "invite_owner_may", setup: ownerInvites, cmd: invite(uStranger), okTypes: []domain.EventType{domain.EventMemberInvited},
			want: reasons(ok, notOwner, notOwner, notOwner)},
		{name: "invite_a_member", cmd: invite(uTarget), want: reasons(domain.ReasonAlreadyMember, domain.ReasonAlreadyMember,
			domain.ReasonAlreadyMember, domain.ReasonAlreadyMember)},
		{name: "invite_a_banned_user", cmd: invite(uBanned), want: reasons(domain.ReasonBanned, domain.ReasonBanned,
			domain.ReasonBanned, domain.ReasonBanned)},
		{name: "join_with_approval", cmd: func(_ *testing.T, w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.Join(p, me, 0, t0)
		}, okTypes: memberCountEvents, want: joiners(domain.ReasonApprovalRequired, domain.ReasonApprovalRequired, ok, domain.ReasonApprovalRequired)},
		{name: "join_without_approval", setup: approvalOff, cmd: func(_ *testing.T, w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.Join(p, me, 0, t0)
		}, okTypes: memberCountEvents, want: joiners(ok, ok, ok, ok)},
		{name: "join_full_group", setup: approvalOff, cmd: func(_ *testing.T, w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.Join(p, me, w.g.MemberCount(), t0)
		}, want: joiners(domain.ReasonGroupFull, domain.ReasonGroupFull, domain.ReasonGroupFull, domain.ReasonGroupFull)},
		{name: "accept_invite", cmd: func(_ *testing.T, w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.AcceptInvite(p, me, 0, t0)
		}, okTypes: memberCountEvents, want: joiners(domain.ReasonNotInvited, domain.ReasonNotInvited, ok, domain.ReasonNotInvited)},
		{name: "request_join", cmd: func(_ *testing.T, w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.RequestJoin(p, me, "hello", t0)
		}, okTypes: []domain.EventType{domain.EventMemberJoinRequested}, want: joiners(ok, ok, ok, ok)},
		{name: "request_join_without_approval", setup: approvalOff, cmd: func(_ *testing.T, w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.RequestJoin(p, me, "hello", t0)
		}, want: joiners(domain.ReasonApprovalNotRequired, domain.ReasonApprovalNotRequired, domain.ReasonApprovalNotRequired, domain.ReasonApprovalNotRequired)},
		{name: "approve_join", cmd: approve(uRequester),
			okTypes: []domain.EventType{domain.EventMemberJoinApproved, domain.EventMemberJoined, countChanged},
			want:    reasons(ok, ok, notAdmin, notAdmin)},
		{name: "approve_join_full", cmd: on(uRequester, func(w *groupWorld, p domain.Principal, me, tg domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.ApproveJoin(p, me, tg, w.g.MemberCount(), t0)
		}), want: reasons(domain.ReasonGroupFull, domain.ReasonGroupFull, notAdmin, notAdmin)},
		{name: "approve_without_request", cmd: approve(uStranger),
			want: reasons(domain.ReasonNoPendingRequest, domain.ReasonNoPendingRequest, notAdmin, notAdmin)},
		{name: "reject_join", cmd: on(uRequester, func(w *groupWorld, p domain.Principal, me, tg domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.RejectJoin(p, me, tg, t0)
		}), okTypes: []domain.EventType{domain.EventMemberJoinRejected}, want: reasons(ok, ok, notAdmin, notAdmin)},
	}
}

func moderationRows() []matrixRow {
	return []matrixRow{
		{name: "leave", cmd: func(_ *testing.T, w *groupWorld, p domain.Principal, me domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.Leave(p, me, t0)
		}, okTypes: []domain.EventType{domain.EventMemberLeft, countChanged}, want: reasons(domain.ReasonOwnerCannotLeave, ok, ok, ok)},
		{name: "remove_member", cmd: remove(uTarget, false), okTypes: []domain.EventType{domain.EventMemberRemoved, countChanged},
			want: reasons(ok, ok, notAdmin, notAdmin)},
		{name: "ban_member", cmd: remove(uTarget, true), okTypes: []domain.EventType{domain.EventMemberRemoved, countChanged},
			want: reasons(ok, ok, notAdmin, notAdmin)},
		{name: "remove_admin", cmd: remove(uAdmin2, false), okTypes: []domain.EventType{domain.EventMemberRemoved, countChanged},
			want: reasons(ok, domain.ReasonCannotRemoveAdmin, notAdmin, notAdmin)},
		{name: "remove_owner", cmd: remove(uOwner, false),
			want: reasons(domain.ReasonSelfAction, domain.ReasonCannotRemoveOwner, notAdmin, notAdmin)},
		{name: "remove_non_member", cmd: remove(uStranger, false),
			want: reasons(domain.ReasonTargetNotMember, domain.ReasonTargetNotMember, notAdmin, notAdmin)},
		{name: "unban", cmd: on(uBanned, func(w *groupWorld, p domain.Principal, me, tg domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.Unban(p, me, tg, t0)
		}), okTypes: []domain.EventType{domain.EventMemberUnbanned}, want: reasons(ok, ok, notAdmin, notAdmin)},
		{name: "unban_not_banned", cmd: on(uRemoved, func(w *groupWorld, p domain.Principal, me, tg domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.Unban(p, me, tg, t0)
		}), want: reasons(domain.ReasonNotBanned, domain.ReasonNotBanned, notAdmin, notAdmin)},
		{name: "make_admin", cmd: on(uTarget, func(w *groupWorld, p domain.Principal, me, tg domain.MembershipState) ([]domain.PendingEvent, error) {
			return w.g.SetRole(p, me, tg, domain.RoleAdmin, t0)
		}), okTypes: []domain.EventType{domain.EventMemberRoleSet}, want: reasons(ok, notOwner, notOwner, notOwner)},
		{name: "mute_member", cmd: mute(uTarget), okTypes: []domain.EventType{domain.EventMemberMuted},
			want: reasons(ok, ok, notAdmin, notAdmin)},
		{name: "mute_admin", cmd: mute(uAdmin2), okTypes: []domain.EventType{domain.EventMemberMuted},
			want: reasons(ok, domain.ReasonCannotMuteAdmin, notAdmin, notAdmin)},
		{name: "mute_owner", cmd: mute(uOwner),
			want: reasons(domain.ReasonSelfAction, domain.ReasonCannotMuteOwner, notAdmin, notAdmin)},
		{name: "post", cmd: post, want: reasons(ok, ok, ok, domain.ReasonMuted)},
		{name: "post_mute_all", setup: muteAll, cmd: post, want: reasons(ok, ok, domain.ReasonGroupMuted, domain.ReasonMuted)},
	}
}

// prepare returns a fresh copy of base with the row's settings applied by the owner.
func (r matrixRow) prepare(t *testing.T, base *groupWorld) *groupWorld {
	t.Helper()
	w := base.clone()
	if r.setup != nil {
		s := w.g.Settings()
		r.setup(&s)
		w.do(t)(w.g.UpdateSettings(as(uOwner), w.m(t, uOwner), s, t0))
	}
	return w
}

func TestPermissionMatrix(t *testing.T) {
	t.Parallel()
	base := newGroupWorld(t)
	for _, row := range matrixRows() {
		for _, a := range matrixActors {
			want, listed := row.want[a.name]
			if !listed {
				t.Fatalf("%s: no expectation for actor %s", row.name, a.name)
			}
			w := row.prepare(t, base)
			evs, err := row.cmd(t, w, a.p, w.actorState(t, a.p))
			if got := reasonOf(err); got != want {
				t.Errorf("%s by %s: got %q, want %q", row.name, a.name, got, want)
				continue
			}
			if err != nil {
				if evs != nil {
					t.Errorf("%s by %s: refused with events %v", row.name, a.name, types(evs))
				}
				continue
			}
			if got := types(evs); len(row.okTypes) > 0 && !reflect.DeepEqual(got, row.okTypes) || len(row.okTypes) == 0 && len(got) != 0 {
				t.Errorf("%s by %s: events %v, want %v", row.name, a.name, got, row.okTypes)
			}
			if evs != nil {
				w.do(t)(evs, nil) // the decision applies cleanly at the expected versions
			}
		}
	}
}

// A dissolved group accepts nothing: every row of the matrix is refused group_dissolved, except
// for principals of another tenant, who learn only tenant_mismatch.
func TestDissolvedGroupAcceptsNothing(t *testing.T) {
	t.Parallel()
	base := newGroupWorld(t)
	base.do(t)(base.g.Dissolve(as(uOwner), base.m(t, uOwner), t0))
	for _, row := range matrixRows() {
		for _, a := range matrixActors {
			w := base.clone()
			_, err := row.cmd(t, w, a.p, w.actorState(t, a.p))
			want := domain.ReasonGroupDissolved
			if a.name == "other_tenant" {
				want = domain.ReasonTenantMismatch
			}
			if got := reasonOf(err); got != want {
				t.Errorf("%s by %s on a dissolved group: got %q, want %q", row.name, a.name, got, want)
			}
		}
	}
	if p := base.g.PermissionsOf(base.m(t, uOwner), t0); p != 0 {
		t.Errorf("owner of a dissolved group holds %s", p)
	}
}

// A group that was never created is ErrNotFound for every command (in the principal's tenant).
func TestUncreatedGroupIsNotFound(t *testing.T) {
	t.Parallel()
	g, _ := domain.NewGroupState(tenantA, groupID)
	w := &groupWorld{g: g, ms: map[domain.UserID]*domain.MembershipState{}}
	for _, row := range matrixRows() {
		_, err := row.cmd(t, w, as(uOwner), w.m(t, uOwner))
		if !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("%s on an uncreated group: err = %v, want ErrNotFound", row.name, err)
		}
	}
}

func TestPermissionsOfRoles(t *testing.T) {
	t.Parallel()
	w := newGroupWorld(t)
	cases := []struct {
		user      domain.UserID
		has, lack domain.Permission
	}{
		{uOwner, domain.PermPost | domain.PermSetRole | domain.PermTransfer | domain.PermDissolve | domain.PermInvite | domain.PermAnnounce, domain.PermLeave},
		{uAdmin, domain.PermPost | domain.PermRemove | domain.PermMute | domain.PermApprove | domain.PermLeave | domain.PermAnnounce, domain.PermSetRole | domain.PermTransfer | domain.PermDissolve},
		{uMember, domain.PermPost | domain.PermInvite | domain.PermLeave, domain.PermRemove | domain.PermMute | domain.PermAnnounce | domain.PermEditSettings},
		{uMuted, domain.PermInvite | domain.PermLeave, domain.PermPost},
		{uOutsider, 0, domain.PermPost},
		{uRemoved, 0, domain.PermPost | domain.PermLeave},
	}
	for _, c := range cases {
		got := w.g.PermissionsOf(w.m(t, c.user), t0)
		if !got.Has(c.has) || got&c.lack != 0 {
			t.Errorf("user %d: permissions %s, want all of %s and none of %s", c.user, got, c.has, c.lack)
		}
	}
	// The mute ends: at its end the member may post again.
	if !w.g.PermissionsOf(w.m(t, uMuted), t0.Add(time.Hour)).Has(domain.PermPost) {
		t.Errorf("mute still in force when it ends")
	}
	if s := (domain.PermPost | domain.PermLeave).String(); s != "post|leave" {
		t.Errorf("String = %q", s)
	}
	if s := domain.Permission(0).String(); s != "none" {
		t.Errorf("String(0) = %q", s)
	}
}

func TestRoles(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"owner", "admin", "member"} {
		if r, err := domain.ParseRole(s); err != nil || r.String() != s {
			t.Errorf("ParseRole(%q) = %q, %v", s, r, err)
		}
	}
	for _, s := range []string{"", "Owner", "root"} {
		if _, err := domain.ParseRole(s); !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("ParseRole(%q) err = %v", s, err)
		}
	}
	checks := []struct {
		r, min domain.Role
		want   bool
	}{
		{domain.RoleOwner, domain.RoleAdmin, true}, {domain.RoleAdmin, domain.RoleAdmin, true},
		{domain.RoleMember, domain.RoleAdmin, false}, {domain.RoleAdmin, domain.RoleOwner, false},
		{domain.RoleOwner, "", false}, {"", domain.RoleMember, false},
	}
	for _, c := range checks {
		if got := c.r.AtLeast(c.min); got != c.want {
			t.Errorf("%q.AtLeast(%q) = %v", c.r, c.min, got)
		}
	}
}

// Handing the group to a muted member lifts the mute; and a stream written before that rule (the
// role owner on top of a mute still running) does not keep the owner from posting or announcing:
// nobody mutes the owner, so nobody could have lifted it.
func TestTheOwnerIsNeverMuted(t *testing.T) {
	t.Parallel()
	w := newGroupWorld(t)
	evs, err := w.g.TransferOwnership(as(uOwner), w.m(t, uOwner), w.m(t, uMuted), t0)
	if err != nil {
		t.Fatal(err)
	}
	legacy := w.clone()
	var lifted int
	var older []domain.PendingEvent
	for _, e := range evs {
		if e.Type == domain.EventMemberMuted {
			lifted++
			continue
		}
		older = append(older, e)
	}
	if lifted != 1 {
		t.Fatalf("transfer to a muted member decided %d lifts of the mute, want 1", lifted)
	}
	w.do(t)(evs, nil)
	if m := w.m(t, uMuted); m.Role() != domain.RoleOwner || m.MutedAt(t0) {
		t.Errorf("new owner: role %q, muted until %s", m.Role(), m.MutedUntil())
	}
	for name, world := range map[string]*groupWorld{"now": w, "stream without the lift": legacy} {
		if name != "now" {
			world.do(t)(older, nil)
		}
		if err := domain.CanPost(world.g, world.m(t, uMuted), t0); err != nil {
			t.Errorf("%s: the new owner posts: %v", name, err)
		}
		if err := domain.CanAnnounce(world.g, world.m(t, uMuted), t0); err != nil {
			t.Errorf("%s: the new owner announces: %v", name, err)
		}
	}
}
