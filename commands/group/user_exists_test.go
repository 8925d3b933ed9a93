package group_test

import (
	"errors"
	"testing"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
)

// TestCommandsRefuseUsersWhoDoNotExist: a friend request, a block and an invitation naming a
// user the tenant does not have are refused with ErrUnknownUser (not found) and write nothing;
// once the user registers, the same commands go through, on a handler that had looked before.
func TestCommandsRefuseUsersWhoDoNotExist(t *testing.T) {
	t.Parallel()
	_, store := newStore(t, 4)
	ctx := testCtx(t)
	tenant := domain.MustTenantID("acme")
	storetest.RegisterUsers(t, store, tenant, 1)
	// 2 exists in another tenant only.
	storetest.RegisterUsers(t, store, domain.MustTenantID("beta"), 2)
	h := newHandlers(t, store, group.Deps{}, group.Config{})
	res, err := h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: who(tenant, 1), Profile: groupProfile(t, "team")})
	if err != nil {
		t.Fatal(err)
	}
	before, err := store.Count(ctx, eventstore.Filter{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	attempts := map[string]func() error{
		"friend request": func() error {
			_, err := h.RequestFriend.Handle(ctx, group.RequestFriend{Actor: who(tenant, 1), Peer: 2})
			return err
		},
		"block": func() error {
			_, err := h.BlockUser.Handle(ctx, group.BlockUser{Actor: who(tenant, 1), Peer: 2})
			return err
		},
		"invite": func() error {
			_, err := h.InviteMember.Handle(ctx, group.InviteMember{Actor: who(tenant, 1), Group: res.Group, User: 2})
			return err
		},
	}
	for name, attempt := range attempts {
		if err := attempt(); !errors.Is(err, group.ErrUnknownUser) || !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("%s naming a user who does not exist: %v, want ErrUnknownUser", name, err)
		}
	}
	if after, err := store.Count(ctx, eventstore.Filter{Tenant: tenant}); err != nil || after != before {
		t.Fatalf("refused commands wrote %d events (%v)", after-before, err)
	}
	storetest.RegisterUsers(t, store, tenant, 2)
	for _, name := range []string{"invite", "friend request", "block"} {
		if err := attempts[name](); err != nil {
			t.Errorf("%s once the user registered: %v", name, err)
		}
	}
}
