package group_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
)

// interposedStore runs meanwhile once, in front of the first append after arm: whatever it
// commits lands between the command's decision and its append, as another node's command would.
type interposedStore struct {
	*eventstore.Store
	mu        sync.Mutex
	meanwhile func()
}

func (s *interposedStore) arm(fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.meanwhile = fn
}

func (s *interposedStore) AppendStreams(ctx context.Context, tenant domain.TenantID, parts []eventstore.StreamAppend) ([]domain.Envelope, error) {
	s.mu.Lock()
	fn := s.meanwhile
	s.meanwhile = nil
	s.mu.Unlock()
	if fn != nil {
		fn()
	}
	return s.Store.AppendStreams(ctx, tenant, parts)
}

// An admin's command decided while they were an admin, whose append comes after the owner
// demoted them (on another node), must not commit: the commands that refuse a lost race
// (remove, mute, approve, set role) fail with a *ConflictError, the others are decided again
// and refused not_admin. Nothing of the admin's command is written.
func TestCommandsOfAnAdminDemotedMeanwhile(t *testing.T) {
	t.Parallel()
	_, store := newStore(t, 4)
	tenant := domain.MustTenantID("acme")
	storetest.RegisterUsers(t, store, tenant, 1, 2, 3, 4, 5)
	setup := newHandlers(t, store, group.Deps{}, group.Config{})
	is := &interposedStore{Store: store}
	racing := newHandlers(t, is, group.Deps{}, group.Config{})
	ctx := testCtx(t)
	owner, admin := who(tenant, 1), who(tenant, 2)

	settings := domain.DefaultGroupSettings()
	settings.WhoMayInvite = domain.RoleAdmin
	settings.JoinApproval = true
	changed := settings
	changed.MuteAll = true

	cases := []struct {
		name     string
		run      func(g domain.GroupID) (group.Result, error)
		conflict bool // *ConflictError; otherwise the refusal not_admin
	}{
		{"remove", func(g domain.GroupID) (group.Result, error) {
			return racing.RemoveMember.Handle(ctx, group.RemoveMember{Actor: admin, Group: g, User: 3, Ban: true})
		}, true},
		{"mute", func(g domain.GroupID) (group.Result, error) {
			return racing.MuteMember.Handle(ctx, group.MuteMember{Actor: admin, Group: g, User: 3, Until: time.Now().Add(time.Hour)})
		}, true},
		{"approve", func(g domain.GroupID) (group.Result, error) {
			return racing.ApproveJoin.Handle(ctx, group.ApproveJoin{Actor: admin, Group: g, User: 4})
		}, true},
		{"invite", func(g domain.GroupID) (group.Result, error) {
			return racing.InviteMember.Handle(ctx, group.InviteMember{Actor: admin, Group: g, User: 5})
		}, false},
		{"settings", func(g domain.GroupID) (group.Result, error) {
			return racing.UpdateGroupSettings.Handle(ctx, group.UpdateGroupSettings{Actor: admin, Group: g, Settings: changed})
		}, false},
	}
	for _, c := range cases {
		g := createGroup(t, setup, owner, &settings)
		for _, u := range []domain.UserID{2, 3} {
			if _, err := setup.InviteMember.Handle(ctx, group.InviteMember{Actor: owner, Group: g, User: u}); err != nil {
				t.Fatal(err)
			}
			if _, err := setup.AcceptInvite.Handle(ctx, group.AcceptInvite{Actor: who(tenant, u), Group: g}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := setup.RequestJoin.Handle(ctx, group.RequestJoin{Actor: who(tenant, 4), Group: g}); err != nil {
			t.Fatal(err)
		}
		if _, err := setup.SetRole.Handle(ctx, group.SetRole{Actor: owner, Group: g, User: 2, Role: domain.RoleAdmin}); err != nil {
			t.Fatal(err)
		}
		before := map[string]int64{}
		for _, u := range []domain.UserID{3, 4, 5} {
			before[domain.MembershipStreamID(g, u)] = memberState(t, store, tenant, g, u).Version()
		}
		before[domain.GroupStreamID(g)] = groupState(t, store, tenant, g).Version()

		is.arm(func() {
			if _, err := setup.SetRole.Handle(ctx, group.SetRole{Actor: owner, Group: g, User: 2, Role: domain.RoleMember}); err != nil {
				t.Errorf("%s: demote the admin: %v", c.name, err)
			}
		})
		_, err := c.run(g)
		var conflict *group.ConflictError
		switch {
		case c.conflict && !(errors.As(err, &conflict) && isConcurrency(err)):
			t.Errorf("%s by an admin demoted meanwhile: %v, want a ConflictError", c.name, err)
		case !c.conflict && reasonOf(err) != domain.ReasonNotAdmin:
			t.Errorf("%s by an admin demoted meanwhile: %v, want the refusal %s", c.name, err, domain.ReasonNotAdmin)
		}
		for stream, v := range before {
			if got, _ := store.LastVersion(ctx, tenant, stream); got != v {
				t.Errorf("%s by an admin demoted meanwhile wrote %s: version %d, want %d", c.name, stream, got, v)
			}
		}
	}
}
