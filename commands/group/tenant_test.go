package group_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
)

// Two tenants use the same group id and the same user ids in one event store and one set of
// handlers (one cache): neither ever sees the other's state, and acting on a group that exists
// only in the other tenant is not found.
func TestTenantsNeverSeeEachOther(t *testing.T) {
	t.Parallel()
	_, store := newStore(t, 4)
	ctx := testCtx(t)
	acme, beta := domain.MustTenantID("acme"), domain.MustTenantID("beta")
	h := newHandlers(t, store, group.Deps{}, group.Config{})
	storetest.RegisterUsers(t, store, acme, 1, 2, 3, 4)
	storetest.RegisterUsers(t, store, beta, 1, 2, 3, 4)

	const shared, acmeOnly = domain.GroupID(42), domain.GroupID(77)
	for _, tenant := range []domain.TenantID{acme, beta} {
		if _, err := h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: who(tenant, 1), Group: shared, Profile: groupProfile(t, tenant.String())}); err != nil {
			t.Fatalf("%s: create group 42: %v", tenant, err)
		}
	}
	if _, err := h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: who(acme, 1), Group: acmeOnly, Profile: groupProfile(t, "acme only")}); err != nil {
		t.Fatal(err)
	}
	join(t, h, acme, shared, 2, 3)
	if _, err := h.BlockUser.Handle(ctx, group.BlockUser{Actor: who(acme, 2), Peer: 1}); err != nil {
		t.Fatal(err)
	}

	if g := groupState(t, store, beta, shared); g.MemberCount() != 1 || g.Profile().Name() != "beta" {
		t.Errorf("beta's group 42: %d members, name %q", g.MemberCount(), g.Profile().Name())
	}
	if m := memberState(t, store, beta, shared, 2); m.Status() != domain.StatusNone {
		t.Errorf("user 2 in beta's group 42: %s", m.Status())
	}
	// Beta's owner removing user 2, a member of acme's group 42 only.
	if _, err := h.RemoveMember.Handle(ctx, group.RemoveMember{Actor: who(beta, 1), Group: shared, User: 2}); reasonOf(err) != domain.ReasonTargetNotMember {
		t.Errorf("beta removes acme's member: %v, want target_not_member", err)
	}
	// Beta's users acting on a group only acme has.
	for name, run := range map[string]func() error{
		"join": func() error {
			_, err := h.JoinGroup.Handle(ctx, group.JoinGroup{Actor: who(beta, 2), Group: acmeOnly})
			return err
		},
		"dissolve": func() error {
			_, err := h.DissolveGroup.Handle(ctx, group.DissolveGroup{Actor: who(beta, 1), Group: acmeOnly})
			return err
		},
	} {
		if err := run(); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("beta %s on acme's group 77: %v, want ErrNotFound", name, err)
		}
	}
	if g := groupState(t, store, acme, acmeOnly); g.Dissolved() || g.MemberCount() != 1 {
		t.Errorf("acme's group 77 changed: dissolved %v, %d members", g.Dissolved(), g.MemberCount())
	}
	// Acme's block does not exist in beta.
	if _, err := h.RequestFriend.Handle(ctx, group.RequestFriend{Actor: who(beta, 1), Peer: 2}); err != nil {
		t.Errorf("beta friend request under acme's block: %v", err)
	}
	if g := groupState(t, store, acme, shared); g.MemberCount() != 3 || g.Profile().Name() != "acme" {
		t.Errorf("acme's group 42: %d members, name %q", g.MemberCount(), g.Profile().Name())
	}
}

// fixedIDs hands out the given ids in order.
type fixedIDs struct {
	mu  sync.Mutex
	ids []domain.GroupID
}

func (f *fixedIDs) NewGroupID(context.Context) (domain.GroupID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.ids[0]
	f.ids = f.ids[1:]
	return id, nil
}

// A drawn group id that is already taken is replaced by the next draw; an explicit one is refused.
func TestCreateGroupDrawsAgainWhenTheIDIsTaken(t *testing.T) {
	t.Parallel()
	_, store := newStore(t, 4)
	ctx := testCtx(t)
	tenant := domain.MustTenantID("acme")
	h := newHandlers(t, store, group.Deps{IDs: &fixedIDs{ids: []domain.GroupID{5, 5, 6}}}, group.Config{})
	first, err := h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: who(tenant, 1), Profile: groupProfile(t, "a")})
	if err != nil || first.Group != 5 {
		t.Fatalf("first create: %+v, %v", first, err)
	}
	second, err := h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: who(tenant, 2), Profile: groupProfile(t, "b")})
	if err != nil || second.Group != 6 {
		t.Fatalf("second create: %+v, %v; want group 6 after the taken 5", second, err)
	}
	if g := groupState(t, store, tenant, 5); g.Owner() != 1 {
		t.Errorf("group 5 owner %d, want 1", g.Owner())
	}
	_, err = h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: who(tenant, 3), Group: 6, Profile: groupProfile(t, "c")})
	if reasonOf(err) != domain.ReasonGroupExists {
		t.Errorf("explicit taken id: %v, want group_exists", err)
	}
}

// Commands without a principal or with bad ids are refused before any I/O.
func TestCommandsValidateTheirInput(t *testing.T) {
	t.Parallel()
	h := newHandlers(t, nil, group.Deps{Store: failingStore{}}, group.Config{})
	ctx := testCtx(t)
	tenant := domain.MustTenantID("acme")
	for name, run := range map[string]func() error{
		"no tenant": func() error {
			_, err := h.JoinGroup.Handle(ctx, group.JoinGroup{Actor: domain.Principal{User: 1}, Group: 1})
			return err
		},
		"no user": func() error {
			_, err := h.JoinGroup.Handle(ctx, group.JoinGroup{Actor: domain.Principal{Tenant: tenant}, Group: 1})
			return err
		},
		"no group": func() error {
			_, err := h.LeaveGroup.Handle(ctx, group.LeaveGroup{Actor: who(tenant, 1)})
			return err
		},
		"no target": func() error {
			_, err := h.RemoveMember.Handle(ctx, group.RemoveMember{Actor: who(tenant, 1), Group: 1})
			return err
		},
		"mute without end": func() error {
			_, err := h.MuteMember.Handle(ctx, group.MuteMember{Actor: who(tenant, 1), Group: 1, User: 2})
			return err
		},
		"mute past year 9999": func() error {
			// 9999-12-31T23:59:59-01:00 is in year 10000 in UTC, which no event payload can carry.
			until := time.Date(9999, 12, 31, 23, 59, 59, 0, time.FixedZone("", -3600))
			_, err := h.MuteMember.Handle(ctx, group.MuteMember{Actor: who(tenant, 1), Group: 1, User: 2, Until: until})
			if ve := (*domain.ValidationError)(nil); errors.As(err, &ve) && ve.Field != "until" {
				return fmt.Errorf("field %s, want until: %v", ve.Field, err)
			}
			return err
		},
		"friend oneself": func() error {
			_, err := h.RequestFriend.Handle(ctx, group.RequestFriend{Actor: who(tenant, 1), Peer: 1})
			return err
		},
	} {
		if err := run(); !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
