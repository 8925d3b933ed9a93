package business_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

// TestUserMemberships lists a user's current groups with names and derived roles: a group the
// user left and a dissolved group are not listed; an admin is admin, the owner owner.
func TestUserMemberships(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	const owner, u, other = domain.UserID(1), domain.UserID(2), domain.UserID(3)
	f.apply(ctx, t, f.w.create(10, owner, "ten")...)
	f.apply(ctx, t, f.w.join(10, u, other)...)
	f.apply(ctx, t, f.w.setRole(10, owner, u, domain.RoleAdmin)...)
	f.apply(ctx, t, f.w.create(20, u, "twenty")...)
	f.apply(ctx, t, f.w.create(30, owner, "thirty")...)
	f.apply(ctx, t, f.w.join(30, u)...)
	f.apply(ctx, t, f.w.leave(30, u)...)
	f.apply(ctx, t, f.w.create(40, owner, "forty")...)
	f.apply(ctx, t, f.w.join(40, u)...)
	f.apply(ctx, t, f.w.dissolve(40, owner)...)

	got, err := f.store.UserMemberships(ctx, f.tenant, u)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, m := range got {
		s = append(s, fmt.Sprintf("%d %s %s %d joined=%v", m.Group, m.Name, m.Role, m.MemberCount, !m.JoinedAt.IsZero()))
	}
	want := []string{"10 ten admin 3 joined=true", "20 twenty owner 1 joined=true"}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("memberships of %d: %q, want %q", u, s, want)
	}
	got, err = f.store.UserMemberships(ctx, f.tenant, other)
	if err != nil || len(got) != 1 || got[0].Role != domain.RoleMember {
		t.Fatalf("memberships of %d: %+v, %v", other, got, err)
	}
	if _, err := f.store.UserMemberships(ctx, f.tenant, 0); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("user 0: %v, want ErrInvalid", err)
	}
}

// TestFriendRequests lists pending requests in both directions and forgets them once answered.
func TestFriendRequests(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	const a, b, c = domain.UserID(1), domain.UserID(2), domain.UserID(3)
	f.apply(ctx, t, f.w.requestFriend(a, b)...)
	f.apply(ctx, t, f.w.requestFriend(c, a)...)
	requests := func(u domain.UserID) string {
		t.Helper()
		rs, err := f.store.FriendRequests(ctx, f.tenant, u)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, r := range rs {
			out += fmt.Sprintf("%d:%v ", r.Peer, r.Incoming)
		}
		return out
	}
	if got := requests(a); got != "3:true 2:false " && got != "2:false 3:true " {
		t.Fatalf("requests of a: %q", got)
	}
	if got := requests(b); got != "1:true " {
		t.Fatalf("requests of b: %q", got)
	}
	ev, err := f.w.relation(a, b).AcceptFriend(f.w.p(b), time.Now()) // b accepts
	f.apply(ctx, t, f.w.decide(b, ev, err)...)
	if got := requests(b); got != "" {
		t.Fatalf("requests of b after accepting: %q", got)
	}
	if got := requests(a); got != "3:true " {
		t.Fatalf("requests of a after b accepted: %q", got)
	}
}
