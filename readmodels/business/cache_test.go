package business_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/business"
)

// answers is everything the queries say about the scenario's users, in a comparable form.
func answers(ctx context.Context, t *testing.T, s *business.Store, tenant domain.TenantID) string {
	t.Helper()
	g, err := s.Group(ctx, tenant, 7)
	if err != nil {
		t.Fatal(err)
	}
	st := must[domain.GroupSettings](t)(s.Settings(ctx, tenant, 7))
	out := fmt.Sprintf("group %s owner %d count %d ann %q status %s v%d settings %+v\n",
		g.Name, g.Owner, g.MemberCount, g.Announcement, g.Status, g.Version, st)
	for uid := domain.UserID(1); uid <= 6; uid++ {
		role := must[domain.Role](t)(s.Role(ctx, tenant, 7, uid))
		member := must[bool](t)(s.IsMember(ctx, tenant, 7, uid))
		muted := must[time.Time](t)(s.MutedUntil(ctx, tenant, 7, uid))
		friends := must[[]domain.UserID](t)(s.Friends(ctx, tenant, uid))
		blocks := must[[]domain.UserID](t)(s.Blocklist(ctx, tenant, uid))
		blocked1 := must[bool](t)(s.IsBlocked(ctx, tenant, uid, 1))
		friend1 := must[bool](t)(s.IsFriend(ctx, tenant, uid, 1))
		groups := must[[]domain.GroupID](t)(s.UserGroups(ctx, tenant, uid))
		nick := ""
		if u, err := s.User(ctx, tenant, uid); err == nil {
			nick = u.Nickname
		} else if !errors.Is(err, domain.ErrNotFound) {
			t.Fatal(err)
		}
		out += fmt.Sprintf("user %d: role %q member %v muted %d friends %v blocks %v blocks1 %v friend1 %v groups %v nick %q\n",
			uid, role, member, muted.UnixMilli(), friends, blocks, blocked1, friend1, groups, nick)
	}
	return out
}

func TestCacheAndMySQLAgreeAfterEachChange(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	w := f.w
	mysql := f.mysqlOnly(t)
	f.apply(ctx, t, concat(w.create(7, 1, "team"), w.join(7, 2, 3, 4, 5), w.befriend(1, 2), w.nick(2, "bob", ""))...)
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	steps := []struct {
		name   string
		events func() []domain.Envelope
		check  func(s *business.Store) error
	}{
		{"role change", func() []domain.Envelope { return w.setRole(7, 1, 3, domain.RoleAdmin) }, func(s *business.Store) error {
			return expect(s.Role(ctx, f.tenant, 7, 3))(domain.RoleAdmin)
		}},
		{"mute", func() []domain.Envelope { return w.mute(7, 1, 5, until) }, func(s *business.Store) error {
			return expectTime(s.MutedUntil(ctx, f.tenant, 7, 5))(until)
		}},
		{"unmute", func() []domain.Envelope { return w.mute(7, 1, 5, time.Time{}) }, func(s *business.Store) error {
			return expectTime(s.MutedUntil(ctx, f.tenant, 7, 5))(time.Time{})
		}},
		{"removal", func() []domain.Envelope { return w.remove(7, 1, 4, false) }, func(s *business.Store) error {
			return errors.Join(expect(s.IsMember(ctx, f.tenant, 7, 4))(false), expect(s.MemberCount(ctx, f.tenant, 7))(4))
		}},
		{"leave", func() []domain.Envelope { return w.leave(7, 3) }, func(s *business.Store) error {
			return errors.Join(expect(s.Role(ctx, f.tenant, 7, 3))(""), expect(s.MemberCount(ctx, f.tenant, 7))(3))
		}},
		{"block", func() []domain.Envelope { return w.block(3, 1) }, func(s *business.Store) error {
			return expect(s.IsBlocked(ctx, f.tenant, 3, 1))(true)
		}},
		{"unblock", func() []domain.Envelope { return w.unblock(3, 1) }, func(s *business.Store) error {
			return expect(s.IsBlocked(ctx, f.tenant, 3, 1))(false)
		}},
		{"unfriend", func() []domain.Envelope { return w.unfriend(2, 1) }, func(s *business.Store) error {
			return expect(s.IsFriend(ctx, f.tenant, 1, 2))(false)
		}},
		{"settings", func() []domain.Envelope {
			return w.settings(7, 1, domain.GroupSettings{JoinApproval: true, WhoMayInvite: domain.RoleAdmin, WhoMayAnnounce: domain.RoleOwner, MuteAll: true})
		}, func(s *business.Store) error {
			st, err := s.Settings(ctx, f.tenant, 7)
			if err == nil && (!st.MuteAll || !st.JoinApproval || st.WhoMayInvite != domain.RoleAdmin) {
				err = fmt.Errorf("settings %+v", st)
			}
			return err
		}},
		{"transfer", func() []domain.Envelope { return w.transfer(7, 1, 2) }, func(s *business.Store) error {
			return errors.Join(expect(s.Role(ctx, f.tenant, 7, 2))(domain.RoleOwner), expect(s.Role(ctx, f.tenant, 7, 1))(domain.RoleMember))
		}},
		{"user profile", func() []domain.Envelope { return w.nick(2, "robert", "away") }, func(s *business.Store) error {
			u, err := s.User(ctx, f.tenant, 2)
			if err == nil && (u.Nickname != "robert" || u.Signature != "away") {
				err = fmt.Errorf("user %+v", u)
			}
			return err
		}},
	}
	for _, step := range steps {
		answers(ctx, t, f.store, f.tenant) // every entry is cached before the change
		f.apply(ctx, t, step.events()...)
		if err := step.check(f.store); err != nil {
			t.Fatalf("%s: cached read: %v", step.name, err)
		}
		if err := step.check(mysql); err != nil {
			t.Fatalf("%s: MySQL read: %v", step.name, err)
		}
		if c, m := answers(ctx, t, f.store, f.tenant), answers(ctx, t, mysql, f.tenant); c != m {
			t.Fatalf("%s: cache and MySQL disagree:\ncache:\n%s\nmysql:\n%s", step.name, c, m)
		}
	}
	checkSet(t, f, ctx, "group:{7}:admins", "0", "2")
	checkSet(t, f, ctx, "group:{7}:members", "0", "1", "2", "5")
}

func expect[T comparable](got T, err error) func(T) error {
	return func(want T) error {
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("got %v, want %v", got, want)
		}
		return nil
	}
}

func expectTime(got time.Time, err error) func(time.Time) error {
	return func(want time.Time) error {
		if err != nil {
			return err
		}
		if !got.Equal(want) {
			return fmt.Errorf("got %v, want %v", got, want)
		}
		return nil
	}
}

func TestRedisFlushOnlyCostsMisses(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	f.apply(ctx, t, scenario(f.w, time.Now().Add(time.Hour))...)
	want := answers(ctx, t, f.mysqlOnly(t), f.tenant)
	if got := answers(ctx, t, f.store, f.tenant); got != want {
		t.Fatalf("cold cache answers differ from MySQL:\n%s\nvs\n%s", got, want)
	}
	keys := must[[]string](t)(f.rdb.Keys(ctx, f.prefix+"*").Result())
	if len(keys) < 10 {
		t.Fatalf("only %d keys cached: %v", len(keys), keys)
	}
	if err := f.rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	if got := answers(ctx, t, f.store, f.tenant); got != want {
		t.Fatalf("answers after a flush differ:\n%s\nvs\n%s", got, want)
	}
	for _, k := range []string{"group:{7}:profile", "group:{7}:members", "group:{7}:admins", "group:{7}:muted",
		"relation:friends:{1}", "relation:blocklist:{3}", "user:{1}:profile"} {
		if f.rdb.Exists(ctx, f.key(k)).Val() != 1 {
			t.Errorf("%s not refilled after the flush", k)
		}
	}
	if got := answers(ctx, t, f.store, f.tenant); got != want {
		t.Fatalf("answers from the refilled cache differ:\n%s\nvs\n%s", got, want)
	}
}

func TestRedisUnreachableAnswersFromMySQL(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	down := newStore(t, f.router, closedPortClient(t), f.prefix)
	events := scenario(f.w, time.Now().Add(time.Hour))
	res, err := down.ApplyBatch(ctx, f.tenant, group, business.DefaultTables(), events)
	if err != nil {
		t.Fatalf("apply with Redis down: %v", err)
	}
	if res.Applied != len(events) || !errors.Is(res.CacheErr, domain.ErrRetryable) || len(res.Invalidated) == 0 {
		t.Fatalf("apply with Redis down: %+v", res)
	}
	if down.PendingInvalidations() != len(res.Invalidated) {
		t.Fatalf("%d invalidations pending, want %d", down.PendingInvalidations(), len(res.Invalidated))
	}
	want := answers(ctx, t, f.mysqlOnly(t), f.tenant)
	start := time.Now()
	if got := answers(ctx, t, down, f.tenant); got != want {
		t.Fatalf("answers with Redis down:\n%s\nwant\n%s", got, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("queries with Redis down took %v", d)
	}
	if !must[bool](t)(down.IsBlocked(ctx, f.tenant, 3, 1)) || must[domain.Role](t)(down.Role(ctx, f.tenant, 7, 2)) != domain.RoleOwner {
		t.Fatal("MySQL fallback answers wrong")
	}
	if _, err := down.Group(ctx, f.tenant, 99); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown group with Redis down: %v", err)
	}
}

func TestTenantsWithTheSameIDsAreIsolated(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	t2 := newTenant(t, f.router)
	w2 := newWorld(t, t2)
	f.apply(ctx, t, concat(f.w.create(7, 1, "first"), f.w.join(7, 2), f.w.block(1, 2), f.w.nick(1, "one", ""))...)
	if _, err := f.store.Apply(ctx, t2, group, business.DefaultTables(),
		concat(w2.create(7, 2, "second"), w2.join(7, 3), w2.befriend(1, 2), w2.nick(1, "uno", ""))); err != nil {
		t.Fatal(err)
	}
	for round := range 2 { // cold, then cached
		g1 := must[business.Group](t)(f.store.Group(ctx, f.tenant, 7))
		g2 := must[business.Group](t)(f.store.Group(ctx, t2, 7))
		if g1.Name != "first" || g2.Name != "second" || g1.Owner != 1 || g2.Owner != 2 {
			t.Fatalf("round %d: groups %+v / %+v", round, g1, g2)
		}
		if must[bool](t)(f.store.IsMember(ctx, f.tenant, 7, 3)) || !must[bool](t)(f.store.IsMember(ctx, t2, 7, 3)) {
			t.Fatalf("round %d: membership of user 3 leaked between tenants", round)
		}
		if !must[bool](t)(f.store.IsBlocked(ctx, f.tenant, 1, 2)) || must[bool](t)(f.store.IsBlocked(ctx, t2, 1, 2)) {
			t.Fatalf("round %d: blocks leaked between tenants", round)
		}
		checkUsers(t, "tenant 1 Friends(1)", must[[]domain.UserID](t)(f.store.Friends(ctx, f.tenant, 1)))
		checkUsers(t, "tenant 2 Friends(1)", must[[]domain.UserID](t)(f.store.Friends(ctx, t2, 1)), 2)
		if u1, u2 := must[business.User](t)(f.store.User(ctx, f.tenant, 1)), must[business.User](t)(f.store.User(ctx, t2, 1)); u1.Nickname != "one" || u2.Nickname != "uno" {
			t.Fatalf("round %d: profiles %q / %q", round, u1.Nickname, u2.Nickname)
		}
	}
	// A change in one tenant leaves the other's entries alone.
	res := f.apply(ctx, t, f.w.leave(7, 2)...)
	for _, k := range res.Invalidated {
		if !slices.Contains([]string{f.key("group:{7}:profile"), f.key("group:{7}:members")}, k) {
			t.Errorf("unexpected invalidation %s", k)
		}
	}
	k2 := f.prefix + t2.String() + ":group:{7}:members"
	if f.rdb.Exists(ctx, k2).Val() != 1 {
		t.Fatalf("tenant 2's member set was dropped by tenant 1's change")
	}
	if must[bool](t)(f.store.IsMember(ctx, f.tenant, 7, 2)) || !must[bool](t)(f.store.IsMember(ctx, t2, 7, 2)) {
		t.Fatal("user 2 left tenant 1's group only")
	}
}

func TestDissolvedAndUnknownGroups(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	w := f.w
	f.apply(ctx, t, concat(w.create(7, 1, "team"), w.join(7, 2, 3))...)
	if !must[bool](t)(f.store.IsMember(ctx, f.tenant, 7, 2)) { // cached before the dissolution
		t.Fatal("user 2 not a member")
	}
	f.apply(ctx, t, w.dissolve(7, 1)...)
	for _, s := range []*business.Store{f.store, f.mysqlOnly(t)} {
		g := must[business.Group](t)(s.Group(ctx, f.tenant, 7))
		if !g.Dissolved() || g.MemberCount != 0 {
			t.Fatalf("dissolved group %+v", g)
		}
		if must[bool](t)(s.IsMember(ctx, f.tenant, 7, 2)) || must[domain.Role](t)(s.Role(ctx, f.tenant, 7, 1)) != "" {
			t.Fatal("a dissolved group still has members")
		}
		page, next, err := s.Members(ctx, f.tenant, 7, "", 10)
		if err != nil || len(page) != 0 || next != "" {
			t.Fatalf("members of a dissolved group: %v %q %v", page, next, err)
		}
		if gs := must[[]domain.GroupID](t)(s.UserGroups(ctx, f.tenant, 2)); len(gs) != 0 {
			t.Fatalf("UserGroups lists a dissolved group: %v", gs)
		}
	}
	checkSet(t, f, ctx, "group:{7}:members", "0")

	for name, call := range map[string]func() error{
		"Group":       func() error { _, err := f.store.Group(ctx, f.tenant, 99); return err },
		"Settings":    func() error { _, err := f.store.Settings(ctx, f.tenant, 99); return err },
		"IsMember":    func() error { _, err := f.store.IsMember(ctx, f.tenant, 99, 1); return err },
		"Role":        func() error { _, err := f.store.Role(ctx, f.tenant, 99, 1); return err },
		"MutedUntil":  func() error { _, err := f.store.MutedUntil(ctx, f.tenant, 99, 1); return err },
		"MemberCount": func() error { _, err := f.store.MemberCount(ctx, f.tenant, 99); return err },
		"Members":     func() error { _, _, err := f.store.Members(ctx, f.tenant, 99, "", 0); return err },
		"User":        func() error { _, err := f.store.User(ctx, f.tenant, 42); return err },
	} {
		if err := call(); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("%s of an unknown entity: %v, want ErrNotFound", name, err)
		}
	}
	if n := must[[]string](t)(f.rdb.Keys(ctx, f.key("group:{99}:*")).Result()); len(n) != 0 {
		t.Errorf("an unknown group was cached: %v", n)
	}
	if _, err := f.store.Group(ctx, f.tenant, 0); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("group id 0: %v", err)
	}
}

func TestConcurrentReadersNeverKeepAStaleEntry(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	w := f.w
	f.apply(ctx, t, concat(w.create(7, 1, "team"), w.join(7, 2, 3, 4))...)
	stop := make(chan struct{})
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, err1 := f.store.IsMember(ctx, f.tenant, 7, 9)
				_, err2 := f.store.Friends(ctx, f.tenant, 9)
				_, err3 := f.store.MemberCount(ctx, f.tenant, 7)
				if err := errors.Join(err1, err2, err3); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range 40 {
		if i%2 == 0 {
			f.apply(ctx, t, concat(w.join(7, 9), w.befriend(9, 1))...)
		} else {
			f.apply(ctx, t, concat(w.leave(7, 9), w.unfriend(9, 1))...)
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The last change was a leave: whatever the readers filled meanwhile, the caches say so.
	if must[bool](t)(f.store.IsMember(ctx, f.tenant, 7, 9)) {
		t.Fatal("cache says user 9 is a member after it left")
	}
	if fr := must[[]domain.UserID](t)(f.store.Friends(ctx, f.tenant, 9)); len(fr) != 0 {
		t.Fatalf("cache says user 9 has friends %v", fr)
	}
	if n := must[int](t)(f.store.MemberCount(ctx, f.tenant, 7)); n != 4 {
		t.Fatalf("cached member count %d, want 4", n)
	}
}

// MemberIDsMany answers as MemberIDs does for each group, whether its entry is cached, missing
// (then filled) or the group unknown or invalid; a group changed after its entry was filled is
// answered anew.
func TestMemberIDsManyAnswersAsMemberIDs(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	w := f.w
	f.apply(ctx, t, concat(w.create(1, 10, "one"), w.join(1, 11, 12), w.create(2, 20, "two"), w.create(3, 30, "three"),
		w.join(3, 31), w.dissolve(3, 30))...)
	if _, err := f.store.MemberIDs(ctx, f.tenant, 1); err != nil { // group 1 cached, group 2 not
		t.Fatal(err)
	}
	gids := []domain.GroupID{1, 2, 3, 99, 0, 1}
	check := func(when string) {
		t.Helper()
		ids, errs := f.store.MemberIDsMany(ctx, f.tenant, gids)
		if len(ids) != len(gids) || len(errs) != len(gids) {
			t.Fatalf("%s: %d answers and %d errors for %d groups", when, len(ids), len(errs), len(gids))
		}
		for i, gid := range gids {
			want, wantErr := f.mysqlOnly(t).MemberIDs(ctx, f.tenant, gid)
			if fmt.Sprint(ids[i]) != fmt.Sprint(want) || !errors.Is(errs[i], errorsKind(wantErr)) || (errs[i] == nil) != (wantErr == nil) {
				t.Errorf("%s: group %d: %v, %v; MySQL says %v, %v", when, gid, ids[i], errs[i], want, wantErr)
			}
		}
	}
	check("first read")
	checkSet(t, f, ctx, "group:{2}:members", "0", "20") // filled by the batch
	check("from the cache")
	f.apply(ctx, t, w.join(2, 21)...)
	check("after a join")
}

// errorsKind is the sentinel err matches (nil for none), to compare errors by kind.
func errorsKind(err error) error {
	for _, k := range []error{domain.ErrNotFound, domain.ErrInvalid} {
		if errors.Is(err, k) {
			return k
		}
	}
	return nil
}
