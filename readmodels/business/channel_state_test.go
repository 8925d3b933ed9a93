package business_test

import (
	"slices"
	"testing"

	"github.com/imledger/imledger/domain"
)

// TestBlockedByAndModerators checks the two lookups of the per-user channel: who blocks a user
// (following blocks and unblocks in both directions) and a group's owner and admins (following
// role changes and an ownership transfer, through the cache and straight from MySQL).
func TestBlockedByAndModerators(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	w := f.w
	f.apply(ctx, t, concat(w.block(2, 1), w.block(3, 1), w.block(1, 4), w.unblock(3, 1))...)
	for _, s := range []struct {
		name string
		u    domain.UserID
		want []domain.UserID
	}{{"1 is blocked by 2", 1, []domain.UserID{2}}, {"4 is blocked by 1", 4, []domain.UserID{1}}, {"2 by nobody", 2, nil}} {
		got, err := f.store.BlockedBy(ctx, f.tenant, s.u)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, s.want) {
			t.Errorf("%s: %v, want %v", s.name, got, s.want)
		}
	}

	g := domain.GroupID(70)
	f.apply(ctx, t, concat(w.create(g, 1, "team"), w.join(g, 2, 3, 4), w.setRole(g, 1, 3, domain.RoleAdmin))...)
	check := func(when string, want []domain.UserID) {
		t.Helper()
		for _, st := range []struct {
			name string
			get  func() ([]domain.UserID, error)
		}{
			{"cached", func() ([]domain.UserID, error) { return f.store.Moderators(ctx, f.tenant, g) }},
			{"mysql", func() ([]domain.UserID, error) { return f.mysqlOnly(t).Moderators(ctx, f.tenant, g) }},
		} {
			got, err := st.get()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s, %s: moderators %v, want %v", when, st.name, got, want)
			}
		}
	}
	check("owner 1, admin 3", []domain.UserID{1, 3})
	f.apply(ctx, t, concat(w.transfer(g, 1, 2), w.setRole(g, 2, 3, domain.RoleMember))...)
	check("ownership to 2 (1 a member now), 3 demoted", []domain.UserID{2})
	if _, err := f.store.Moderators(ctx, f.tenant, 999); err == nil {
		t.Error("moderators of an unknown group: no error")
	}
}
