package group_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
)

// changeLog is a ChangeListener that remembers what it heard.
type changeLog struct {
	mu  sync.Mutex
	got []group.Change
}

func (l *changeLog) ChangesCommitted(_ context.Context, _ domain.TenantID, changes []group.Change) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, changes...)
}

func (l *changeLog) take() []group.Change {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.got
	l.got = nil
	return out
}

// TestChangeListenerHearsWhoMadeEachChange checks that the ChangeListener hears every committed
// change with the user it concerns, who made it (the approver, not the member) and, for a role,
// the new role; and nothing for a command that changed nothing.
func TestChangeListenerHearsWhoMadeEachChange(t *testing.T) {
	t.Parallel()
	_, store := newStore(t, 4)
	tenant := domain.MustTenantID("acme")
	storetest.RegisterUsers(t, store, tenant, 1, 2, 3)
	log := &changeLog{}
	h := newHandlers(t, store, group.Deps{Changes: log}, group.Config{})
	ctx := testCtx(t)
	settings := domain.DefaultGroupSettings()
	settings.JoinApproval = true
	res, err := h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: who(tenant, 1), Profile: groupProfile(t, "team"), Settings: &settings})
	if err != nil {
		t.Fatal(err)
	}
	g := res.Group
	steps := []struct {
		name string
		run  func() (group.Result, error)
		want []group.Change
	}{
		{"2 asks to join", func() (group.Result, error) {
			return h.RequestJoin.Handle(ctx, group.RequestJoin{Actor: who(tenant, 2), Group: g})
		}, []group.Change{{Kind: group.ChangeJoinRequested, Group: g, User: 2, By: 2}}},
		{"1 approves", func() (group.Result, error) {
			return h.ApproveJoin.Handle(ctx, group.ApproveJoin{Actor: who(tenant, 1), Group: g, User: 2})
		}, []group.Change{{Kind: group.ChangeJoined, Group: g, User: 2, By: 1}}},
		{"1 makes 2 an admin", func() (group.Result, error) {
			return h.SetRole.Handle(ctx, group.SetRole{Actor: who(tenant, 1), Group: g, User: 2, Role: domain.RoleAdmin})
		}, []group.Change{{Kind: group.ChangeRoleSet, Group: g, User: 2, By: 1, Role: domain.RoleAdmin}}},
		{"again: unchanged", func() (group.Result, error) {
			return h.SetRole.Handle(ctx, group.SetRole{Actor: who(tenant, 1), Group: g, User: 2, Role: domain.RoleAdmin})
		}, nil},
		{"3 asks 1 for friendship", func() (group.Result, error) {
			return h.RequestFriend.Handle(ctx, group.RequestFriend{Actor: who(tenant, 3), Peer: 1})
		}, []group.Change{{Kind: group.ChangeFriendRequested, User: 3, Peer: 1, By: 3}}},
	}
	log.take()
	for _, s := range steps {
		if _, err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := log.take(); !slices.Equal(got, s.want) {
			t.Errorf("%s: heard %+v, want %+v", s.name, got, s.want)
		}
	}
}
