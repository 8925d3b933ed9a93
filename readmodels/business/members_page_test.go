package business_test

import (
	"errors"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/business"
)

func TestMemberPagesAreStableWhileMembersJoin(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	w := f.w
	const owner = 500
	var original []domain.UserID
	events := w.create(7, owner, "big")
	for u := domain.UserID(2); u <= 60; u += 2 {
		events = append(events, w.join(7, u)...)
		original = append(original, u)
	}
	events = append(events, concat(w.setRole(7, owner, 40, domain.RoleAdmin), w.setRole(7, owner, 12, domain.RoleAdmin))...)
	f.apply(ctx, t, events...)

	joiner := domain.UserID(1)
	listed, pages := walkMembers(t, f, 7, func() {
		// Users join between page reads, some sorting before the cursor and some after it.
		f.apply(ctx, t, concat(w.join(7, joiner), w.join(7, 1000+joiner))...)
		joiner += 2
	})
	seen := map[domain.UserID]int{}
	for _, m := range listed {
		seen[m.User]++
	}
	for u, n := range seen {
		if n != 1 {
			t.Errorf("user %d listed %d times", u, n)
		}
	}
	for _, u := range append(original, owner) {
		if seen[u] != 1 {
			t.Errorf("member %d present throughout was listed %d times", u, seen[u])
		}
	}
	if seen[1001] != 1 {
		t.Errorf("a member joining after the cursor was not listed")
	}
	first, _, err := f.store.Members(ctx, f.tenant, 7, "", 3)
	if err != nil || len(first) != 3 || first[0].User != owner || first[0].Role != domain.RoleOwner ||
		first[1].User != 12 || first[2].User != 40 || first[2].Role != domain.RoleAdmin {
		t.Fatalf("first page %+v, %v", first, err)
	}
	for _, bad := range []string{"nope", "bTE6OTk6MQ", "!!"} {
		if _, _, err := f.store.Members(ctx, f.tenant, 7, bad, 5); !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("cursor %q: %v, want ErrInvalid", bad, err)
		}
	}
	total := len(original) + 1 + 2*(pages-1)
	all, next, err := f.store.Members(ctx, f.tenant, 7, "", 0) // default page size 50
	if err != nil || len(all) != total || next != "" {
		t.Fatalf("default page: %d members, next %q, %v; want all %d", len(all), next, err, total)
	}
	if n := must[int](t)(f.store.MemberCount(ctx, f.tenant, 7)); n != total {
		t.Fatalf("MemberCount = %d, want %d", n, total)
	}
}

func TestMembersPageSizeIsCapped(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	s, err := business.NewStore(f.router, f.rdb, business.Config{KeyPrefix: f.prefix, MaxPageSize: 2, DefaultPageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	f.apply(ctx, t, concat(f.w.create(7, 1, "x"), f.w.join(7, 2, 3, 4))...)
	page, next, err := s.Members(ctx, f.tenant, 7, "", 1000)
	if err != nil || len(page) != 2 || next == "" {
		t.Fatalf("capped page: %v %q %v", page, next, err)
	}
}

// walkMembers reads group gid's member list in pages of 7, calling between after each page but
// the last, and checks that each page is full but the last and that the list is ordered by role
// rank, then user id.
func walkMembers(t *testing.T, f *fixture, gid domain.GroupID, between func()) (listed []business.Member, pages int) {
	t.Helper()
	ctx := testCtx(t)
	rank := map[domain.Role]int{domain.RoleOwner: 0, domain.RoleAdmin: 1, domain.RoleMember: 2}
	cursor := ""
	for {
		page, next, err := f.store.Members(ctx, f.tenant, gid, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page) > 7 || (next != "" && len(page) != 7) {
			t.Fatalf("page %d has %d members, next %q", pages, len(page), next)
		}
		for _, m := range page {
			if m.JoinedAt.IsZero() {
				t.Fatalf("member %d without join time", m.User)
			}
			if n := len(listed); n > 0 {
				prev := listed[n-1]
				if rank[m.Role] < rank[prev.Role] || (rank[m.Role] == rank[prev.Role] && m.User <= prev.User) {
					t.Fatalf("page %d: %d (%s) after %d (%s) breaks the order", pages, m.User, m.Role, prev.User, prev.Role)
				}
			}
			listed = append(listed, m)
		}
		if next == "" {
			return listed, pages
		}
		if pages > 50 {
			t.Fatal("pagination does not end")
		}
		cursor = next
		between()
	}
}
