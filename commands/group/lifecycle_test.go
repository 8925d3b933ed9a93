package group_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
)

// step is one command of a scenario and what it must answer.
type step struct {
	name    string
	run     func(ctx context.Context) (group.Result, error)
	reason  string   // expected refusal; "" expects success
	changes []string // expected notifications, as the recorder spells them (nil: not checked)
}

// runSteps runs the steps in order against rec.
func runSteps(t *testing.T, rec *recorder, steps []step) {
	t.Helper()
	ctx := testCtx(t)
	for _, s := range steps {
		res, err := s.run(ctx)
		changes, streams := rec.take()
		if s.reason != "" {
			if reasonOf(err) != s.reason {
				t.Errorf("%s: error %v, want refusal %s", s.name, err, s.reason)
			}
			if len(changes)+len(streams) > 0 {
				t.Errorf("%s: refused, but notified %v and invalidated %v", s.name, changes, streams)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", s.name, err)
			continue
		}
		if s.changes != nil && !slices.Equal(changes, s.changes) {
			t.Errorf("%s: notified %q, want %q", s.name, changes, s.changes)
		}
		if len(streams) != len(res.Versions) {
			t.Errorf("%s: invalidated %v for versions %v", s.name, streams, res.Versions)
		}
	}
}

// A group's life through every group and membership command, with the refusals the domain
// gives, the notifications transport would push and the invalidations the send path would see.
func TestGroupLifecycle(t *testing.T) {
	t.Parallel()
	_, store := newStore(t, 4)
	tenant := domain.MustTenantID("acme")
	storetest.RegisterUsers(t, store, tenant, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	rec := &recorder{}
	h := newHandlers(t, store, group.Deps{Notifier: rec, Invalidator: rec}, group.Config{})
	p := func(u domain.UserID) domain.Principal { return who(tenant, u) }

	res, err := h.CreateGroup.Handle(testCtx(t), group.CreateGroup{Actor: p(1), Profile: groupProfile(t, "team")})
	if err != nil {
		t.Fatal(err)
	}
	g := res.Group
	G := g.String()
	if res.Topic.String() != "grp"+G || len(res.Versions) != 2 || res.Versions[0] != (group.StreamVersion{StreamID: "group:" + G, Version: 1}) {
		t.Fatalf("create: %+v", res)
	}
	if changes, streams := rec.take(); !slices.Equal(changes, []string{"group " + G + " group_created", "member " + G + " 1 joined"}) ||
		!slices.Equal(streams, []string{"acme/group:" + G, "acme/member:" + G + ":1"}) {
		t.Fatalf("create notified %q, invalidated %q", changes, streams)
	}
	approval := domain.DefaultGroupSettings()
	approval.JoinApproval = true
	muteAll := approval
	muteAll.MuteAll = true
	future := time.Now().Add(time.Hour)

	runSteps(t, rec, []step{
		{name: "non-member renames", reason: domain.ReasonNotMember, run: func(ctx context.Context) (group.Result, error) {
			return h.UpdateGroupProfile.Handle(ctx, group.UpdateGroupProfile{Actor: p(9), Group: g, Profile: groupProfile(t, "x")})
		}},
		{name: "owner renames", changes: []string{"group " + G + " group_profile"}, run: func(ctx context.Context) (group.Result, error) {
			return h.UpdateGroupProfile.Handle(ctx, group.UpdateGroupProfile{Actor: p(1), Group: g, Profile: groupProfile(t, "team 2")})
		}},
		{name: "owner requires approval", changes: []string{"group " + G + " group_settings"}, run: func(ctx context.Context) (group.Result, error) {
			return h.UpdateGroupSettings.Handle(ctx, group.UpdateGroupSettings{Actor: p(1), Group: g, Settings: approval})
		}},
		{name: "direct join needs approval", reason: domain.ReasonApprovalRequired, run: func(ctx context.Context) (group.Result, error) {
			return h.JoinGroup.Handle(ctx, group.JoinGroup{Actor: p(2), Group: g})
		}},
		{name: "2 asks to join", changes: []string{"member " + G + " 2 join_requested"}, run: func(ctx context.Context) (group.Result, error) {
			return h.RequestJoin.Handle(ctx, group.RequestJoin{Actor: p(2), Group: g, Message: "hi"})
		}},
		{name: "owner approves 2", changes: []string{"member " + G + " 2 joined"}, run: func(ctx context.Context) (group.Result, error) {
			return h.ApproveJoin.Handle(ctx, group.ApproveJoin{Actor: p(1), Group: g, User: 2})
		}},
		{name: "3 asks to join", run: func(ctx context.Context) (group.Result, error) {
			return h.RequestJoin.Handle(ctx, group.RequestJoin{Actor: p(3), Group: g})
		}},
		{name: "plain member 2 cannot reject", reason: domain.ReasonNotAdmin, run: func(ctx context.Context) (group.Result, error) {
			return h.RejectJoin.Handle(ctx, group.RejectJoin{Actor: p(2), Group: g, User: 3})
		}},
		{name: "owner rejects 3", changes: []string{"member " + G + " 3 join_rejected"}, run: func(ctx context.Context) (group.Result, error) {
			return h.RejectJoin.Handle(ctx, group.RejectJoin{Actor: p(1), Group: g, User: 3})
		}},
		{name: "2 invites 4", changes: []string{"member " + G + " 4 invited"}, run: func(ctx context.Context) (group.Result, error) {
			return h.InviteMember.Handle(ctx, group.InviteMember{Actor: p(2), Group: g, User: 4})
		}},
		{name: "5 has no invitation", reason: domain.ReasonNotInvited, run: func(ctx context.Context) (group.Result, error) {
			return h.AcceptInvite.Handle(ctx, group.AcceptInvite{Actor: p(5), Group: g})
		}},
		{name: "4 accepts", changes: []string{"member " + G + " 4 joined"}, run: func(ctx context.Context) (group.Result, error) {
			return h.AcceptInvite.Handle(ctx, group.AcceptInvite{Actor: p(4), Group: g})
		}},
		{name: "owner makes 2 admin", changes: []string{"member " + G + " 2 role_set"}, run: func(ctx context.Context) (group.Result, error) {
			return h.SetRole.Handle(ctx, group.SetRole{Actor: p(1), Group: g, User: 2, Role: domain.RoleAdmin})
		}},
		{name: "admin cannot set roles", reason: domain.ReasonNotOwner, run: func(ctx context.Context) (group.Result, error) {
			return h.SetRole.Handle(ctx, group.SetRole{Actor: p(2), Group: g, User: 4, Role: domain.RoleAdmin})
		}},
		{name: "admin mutes 4", changes: []string{"member " + G + " 4 muted"}, run: func(ctx context.Context) (group.Result, error) {
			return h.MuteMember.Handle(ctx, group.MuteMember{Actor: p(2), Group: g, User: 4, Until: future})
		}},
		{name: "admin cannot mute the owner", reason: domain.ReasonCannotMuteOwner, run: func(ctx context.Context) (group.Result, error) {
			return h.MuteMember.Handle(ctx, group.MuteMember{Actor: p(2), Group: g, User: 1, Until: future})
		}},
		{name: "admin unmutes 4", changes: []string{"member " + G + " 4 unmuted"}, run: func(ctx context.Context) (group.Result, error) {
			return h.UnmuteMember.Handle(ctx, group.UnmuteMember{Actor: p(2), Group: g, User: 4})
		}},
		{name: "admin announces", changes: []string{"group " + G + " announcement"}, run: func(ctx context.Context) (group.Result, error) {
			return h.UpdateAnnouncement.Handle(ctx, group.UpdateAnnouncement{Actor: p(2), Group: g, Text: "welcome"})
		}},
		{name: "member cannot announce", reason: domain.ReasonNotAdmin, run: func(ctx context.Context) (group.Result, error) {
			return h.UpdateAnnouncement.Handle(ctx, group.UpdateAnnouncement{Actor: p(4), Group: g, Text: "me"})
		}},
		{name: "admin removes and bans 4", changes: []string{"member " + G + " 4 removed"}, run: func(ctx context.Context) (group.Result, error) {
			return h.RemoveMember.Handle(ctx, group.RemoveMember{Actor: p(2), Group: g, User: 4, Ban: true})
		}},
		{name: "banned 4 cannot ask again", reason: domain.ReasonBanned, run: func(ctx context.Context) (group.Result, error) {
			return h.RequestJoin.Handle(ctx, group.RequestJoin{Actor: p(4), Group: g})
		}},
		{name: "admin unbans 4", changes: []string{"member " + G + " 4 unbanned"}, run: func(ctx context.Context) (group.Result, error) {
			return h.UnbanMember.Handle(ctx, group.UnbanMember{Actor: p(2), Group: g, User: 4})
		}},
		{name: "4 asks again", run: func(ctx context.Context) (group.Result, error) {
			return h.RequestJoin.Handle(ctx, group.RequestJoin{Actor: p(4), Group: g})
		}},
		{name: "owner mutes all", run: func(ctx context.Context) (group.Result, error) {
			return h.UpdateGroupSettings.Handle(ctx, group.UpdateGroupSettings{Actor: p(1), Group: g, Settings: muteAll})
		}},
		{name: "owner cannot leave", reason: domain.ReasonOwnerCannotLeave, run: func(ctx context.Context) (group.Result, error) {
			return h.LeaveGroup.Handle(ctx, group.LeaveGroup{Actor: p(1), Group: g})
		}},
		{name: "owner hands over to 2", changes: []string{"group " + G + " owner", "member " + G + " 2 role_set", "member " + G + " 1 role_set"},
			run: func(ctx context.Context) (group.Result, error) {
				return h.TransferOwnership.Handle(ctx, group.TransferOwnership{Actor: p(1), Group: g, To: 2})
			}},
		{name: "former owner leaves", changes: []string{"member " + G + " 1 left"}, run: func(ctx context.Context) (group.Result, error) {
			return h.LeaveGroup.Handle(ctx, group.LeaveGroup{Actor: p(1), Group: g})
		}},
		{name: "former owner cannot dissolve", reason: domain.ReasonNotMember, run: func(ctx context.Context) (group.Result, error) {
			return h.DissolveGroup.Handle(ctx, group.DissolveGroup{Actor: p(1), Group: g})
		}},
		{name: "new owner dissolves", changes: []string{"group " + G + " dissolved"}, run: func(ctx context.Context) (group.Result, error) {
			return h.DissolveGroup.Handle(ctx, group.DissolveGroup{Actor: p(2), Group: g})
		}},
		{name: "nothing after dissolution", reason: domain.ReasonGroupDissolved, run: func(ctx context.Context) (group.Result, error) {
			return h.RequestJoin.Handle(ctx, group.RequestJoin{Actor: p(6), Group: g})
		}},
	})

	gs := groupState(t, store, tenant, g)
	if !gs.Dissolved() || gs.Owner() != 2 || gs.MemberCount() != 1 || gs.Announcement() != "welcome" || gs.Profile().Name() != "team 2" {
		t.Errorf("final group: dissolved %v owner %d members %d announcement %q name %q",
			gs.Dissolved(), gs.Owner(), gs.MemberCount(), gs.Announcement(), gs.Profile().Name())
	}
	if m := memberState(t, store, tenant, g, 4); m.Status() != domain.StatusRequested || m.Banned() {
		t.Errorf("user 4: status %s banned %v", m.Status(), m.Banned())
	}
}

// Commands that would not change anything write nothing, notify nobody and say so.
func TestUnchangedCommandsWriteNothing(t *testing.T) {
	t.Parallel()
	_, store := newStore(t, 4)
	tenant := domain.MustTenantID("acme")
	storetest.RegisterUsers(t, store, tenant, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	rec := &recorder{}
	h := newHandlers(t, store, group.Deps{Notifier: rec, Invalidator: rec}, group.Config{})
	ctx := testCtx(t)
	g := createGroup(t, h, who(tenant, 1), nil)
	join(t, h, tenant, g, 2)
	rec.take()
	before := groupState(t, store, tenant, g).Version()
	for name, run := range map[string]func() (group.Result, error){
		"same profile": func() (group.Result, error) {
			return h.UpdateGroupProfile.Handle(ctx, group.UpdateGroupProfile{Actor: who(tenant, 1), Group: g, Profile: groupProfile(t, "g")})
		},
		"same settings": func() (group.Result, error) {
			return h.UpdateGroupSettings.Handle(ctx, group.UpdateGroupSettings{Actor: who(tenant, 1), Group: g, Settings: domain.DefaultGroupSettings()})
		},
		"unmute of an unmuted member": func() (group.Result, error) {
			return h.UnmuteMember.Handle(ctx, group.UnmuteMember{Actor: who(tenant, 1), Group: g, User: 2})
		},
		"same role": func() (group.Result, error) {
			return h.SetRole.Handle(ctx, group.SetRole{Actor: who(tenant, 1), Group: g, User: 2, Role: domain.RoleMember})
		},
	} {
		res, err := run()
		if err != nil || !res.Unchanged || len(res.Versions) != 0 {
			t.Errorf("%s: %+v, %v", name, res, err)
		}
	}
	if changes, streams := rec.take(); len(changes)+len(streams) > 0 {
		t.Errorf("notified %v, invalidated %v", changes, streams)
	}
	if v := groupState(t, store, tenant, g).Version(); v != before {
		t.Errorf("group stream moved from %d to %d", before, v)
	}
}

// Friend requests, acceptance, removal, declines and blocks between two users, and profiles.
func TestRelationsAndProfiles(t *testing.T) {
	t.Parallel()
	_, store := newStore(t, 4)
	tenant := domain.MustTenantID("acme")
	storetest.RegisterUsers(t, store, tenant, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	rec := &recorder{}
	h := newHandlers(t, store, group.Deps{Notifier: rec, Invalidator: rec}, group.Config{})
	p := func(u domain.UserID) domain.Principal { return who(tenant, u) }
	nick, err := domain.NewUserProfile("ann", "https://img/a.png", "hello")
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, rec, []step{
		{name: "1 asks 2", changes: []string{"relation 1 2 friend_requested"}, run: func(ctx context.Context) (group.Result, error) {
			return h.RequestFriend.Handle(ctx, group.RequestFriend{Actor: p(1), Peer: 2, Message: "hi"})
		}},
		{name: "1 asks again", reason: domain.ReasonAlreadyRequested, run: func(ctx context.Context) (group.Result, error) {
			return h.RequestFriend.Handle(ctx, group.RequestFriend{Actor: p(1), Peer: 2})
		}},
		{name: "2 accepts", changes: []string{"relation 2 1 friend_accepted"}, run: func(ctx context.Context) (group.Result, error) {
			return h.AcceptFriend.Handle(ctx, group.AcceptFriend{Actor: p(2), Peer: 1})
		}},
		{name: "1 ends it", changes: []string{"relation 1 2 friend_removed"}, run: func(ctx context.Context) (group.Result, error) {
			return h.RemoveFriend.Handle(ctx, group.RemoveFriend{Actor: p(1), Peer: 2})
		}},
		{name: "2 asks 1", run: func(ctx context.Context) (group.Result, error) {
			return h.RequestFriend.Handle(ctx, group.RequestFriend{Actor: p(2), Peer: 1})
		}},
		{name: "1 declines", changes: []string{"relation 1 2 friend_declined"}, run: func(ctx context.Context) (group.Result, error) {
			return h.DeclineFriend.Handle(ctx, group.DeclineFriend{Actor: p(1), Peer: 2})
		}},
		{name: "2 blocks 1", changes: []string{"relation 2 1 blocked"}, run: func(ctx context.Context) (group.Result, error) {
			return h.BlockUser.Handle(ctx, group.BlockUser{Actor: p(2), Peer: 1})
		}},
		{name: "blocked 1 cannot ask", reason: domain.ReasonBlocked, run: func(ctx context.Context) (group.Result, error) {
			return h.RequestFriend.Handle(ctx, group.RequestFriend{Actor: p(1), Peer: 2})
		}},
		{name: "2 unblocks 1", changes: []string{"relation 2 1 unblocked"}, run: func(ctx context.Context) (group.Result, error) {
			return h.UnblockUser.Handle(ctx, group.UnblockUser{Actor: p(2), Peer: 1})
		}},
		{name: "1 sets a profile", changes: []string{"profile 1"}, run: func(ctx context.Context) (group.Result, error) {
			return h.UpdateProfile.Handle(ctx, group.UpdateProfile{Actor: p(1), Patch: nick.Patch()})
		}},
	})
	res, err := h.BlockUser.Handle(testCtx(t), group.BlockUser{Actor: p(2), Peer: 1})
	if err != nil || res.Topic.String() != "p2p1_2" || res.Versions[0].StreamID != "relation:1:2" {
		t.Errorf("block: %+v, %v", res, err)
	}
	if _, err := h.BlockUser.Handle(testCtx(t), group.BlockUser{Actor: p(2), Peer: 2}); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("blocking oneself: %v, want ErrInvalid", err)
	}
	if res, err := h.UpdateProfile.Handle(testCtx(t), group.UpdateProfile{Actor: p(1), Patch: nick.Patch()}); err != nil || !res.Unchanged {
		t.Errorf("same profile again: %+v, %v", res, err)
	}
}
