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

// TestGroupRequestsListsWhatAUserHasASayIn checks the pending requests a user re-reads on a
// resync: an invitation to them (with the inviter), their own join request, and the join
// requests of a group they administer; not requests of groups they merely belong to, nor
// requests decided since, nor those of a dissolved group.
func TestGroupRequestsListsWhatAUserHasASayIn(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	w := f.w
	approval := domain.DefaultGroupSettings()
	approval.JoinApproval = true
	const me domain.UserID = 1
	invite := func(g domain.GroupID, by, u domain.UserID) []domain.Envelope {
		ev, err := w.group(g).Invite(w.p(by), *w.member(g, by), *w.member(g, u), now())
		return w.decide(by, ev, err)
	}
	request := func(g domain.GroupID, u domain.UserID) []domain.Envelope {
		ev, err := w.group(g).RequestJoin(w.p(u), *w.member(g, u), "let me in", now())
		return w.decide(u, ev, err)
	}
	f.apply(ctx, t, concat(
		w.create(10, 2, "invites"), invite(10, 2, me), // 2 invites me
		w.create(11, 3, "closed"), w.settings(11, 3, approval), request(11, me), // my request to 11
		w.create(12, 4, "mine"), w.join(12, me), w.setRole(12, 4, me, domain.RoleAdmin), w.settings(12, 4, approval),
		request(12, 5), request(12, 6), // requests to a group I administer
		w.create(13, 7, "memberonly"), w.join(13, me), w.settings(13, 7, approval), request(13, 8), // not mine to decide
		w.create(14, me, "gone"), w.settings(14, me, approval), request(14, 9), w.dissolve(14, me),
	)...)
	rs, err := f.store.GroupRequests(ctx, f.tenant, me)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		g          domain.GroupID
		invitation bool
		incoming   bool
		user, by   domain.UserID
	}
	var got []row
	for _, r := range rs {
		got = append(got, row{r.Group, r.Invitation, r.Incoming, r.User, r.By})
	}
	slices.SortFunc(got, func(a, b row) int { return int(a.g-b.g)*100 + int(a.user-b.user) })
	want := []row{{10, true, true, me, 2}, {11, false, false, me, 0}, {12, false, true, 5, 0}, {12, false, true, 6, 0}}
	if !slices.Equal(got, want) {
		t.Errorf("requests %+v, want %+v", got, want)
	}
}
