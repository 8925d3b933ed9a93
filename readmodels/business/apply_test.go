package business_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/hot"
)

var _ hot.GroupSizer = (*business.Store)(nil)

// scenario is a realistic history: a group with joins, a role change, a mute, a ban, an ownership
// transfer, a friendship, a block and profile updates.
func scenario(w *world, mutedUntil time.Time) []domain.Envelope {
	return concat(
		w.create(7, 1, "team"),
		w.join(7, 2, 3, 4, 5),
		w.setRole(7, 1, 2, domain.RoleAdmin),
		w.mute(7, 1, 3, mutedUntil),
		w.remove(7, 1, 4, true),
		w.transfer(7, 1, 2),
		w.setRole(7, 2, 5, domain.RoleAdmin),
		w.rename(7, 2, "seven"),
		w.announce(7, 2, "hello all"),
		w.befriend(1, 2),
		w.block(3, 1),
		w.nick(1, "alice", "busy"),
	)
}

type memberRowView struct {
	role, status string
	muted        bool
	banned       bool
	version      int64
}

func memberRows(ctx context.Context, t *testing.T, f *fixture, gid int64) map[int64]memberRowView {
	t.Helper()
	rows, err := f.db(ctx, t).QueryContext(ctx, "SELECT user_id, role, status, muted_until IS NOT NULL, banned, version FROM im_group_members WHERE group_id = ?", gid)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]memberRowView{}
	for rows.Next() {
		var uid int64
		var v memberRowView
		if err := rows.Scan(&uid, &v.role, &v.status, &v.muted, &v.banned, &v.version); err != nil {
			t.Fatal(err)
		}
		out[uid] = v
	}
	return out
}

func TestApplyScenarioWritesRowsAndCaches(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	events := scenario(f.w, until)
	res := f.apply(ctx, t, events...)
	if res.Applied != len(events) {
		t.Fatalf("applied %d of %d", res.Applied, len(events))
	}
	for _, k := range []string{"group:{7}:profile", "group:{7}:members", "group:{7}:admins", "group:{7}:muted",
		"relation:friends:{1}", "relation:friends:{2}", "relation:blocklist:{3}", "user:{1}:profile"} {
		if !slices.Contains(res.Invalidated, f.key(k)) {
			t.Errorf("key %s not reported invalidated: %v", k, res.Invalidated)
		}
	}
	if slices.Contains(res.Invalidated, f.key("relation:blocklist:{1}")) {
		t.Errorf("user 1 blocks nobody, yet its blocklist was invalidated")
	}

	checkScenarioRows(ctx, t, f)
	checkScenarioQueries(ctx, t, f, until)
	checkScenarioKeys(ctx, t, f, until)
}

// checkScenarioRows checks the MySQL rows the scenario leaves.
func checkScenarioRows(ctx context.Context, t *testing.T, f *fixture) {
	t.Helper()
	db := f.db(ctx, t)
	var owner, count, version int64
	var name, ann, status string
	if err := db.QueryRowContext(ctx, "SELECT owner_id, member_count, version, name, announcement, status FROM im_groups WHERE group_id = 7").
		Scan(&owner, &count, &version, &name, &ann, &status); err != nil {
		t.Fatal(err)
	}
	if owner != 2 || count != 4 || version != f.w.group(7).Version() || name != "seven" || ann != "hello all" || status != "normal" {
		t.Fatalf("im_groups row: owner %d count %d version %d name %q ann %q status %q", owner, count, version, name, ann, status)
	}
	want := map[int64]memberRowView{
		1: {role: "member", status: "member", version: 2},
		2: {role: "owner", status: "member", version: 3},
		3: {role: "member", status: "member", muted: true, version: 2},
		4: {role: "", status: "removed", banned: true, version: 2},
		5: {role: "admin", status: "member", version: 2},
	}
	if got := memberRows(ctx, t, f, 7); !mapsEqual(got, want) {
		t.Fatalf("im_group_members rows %+v, want %+v", got, want)
	}
	type rel struct {
		friend, blocked bool
		request         string
		version         int64
	}
	rels := map[[2]int64]rel{}
	rows, err := db.QueryContext(ctx, "SELECT user_id, peer_id, friend, blocked, request, version FROM im_relations")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k [2]int64
		var r rel
		if err := rows.Scan(&k[0], &k[1], &r.friend, &r.blocked, &r.request, &r.version); err != nil {
			t.Fatal(err)
		}
		rels[k] = r
	}
	rows.Close()
	wantRels := map[[2]int64]rel{
		{1, 2}: {friend: true, version: 2}, {2, 1}: {friend: true, version: 2},
		{1, 3}: {version: 1}, {3, 1}: {blocked: true, version: 1},
	}
	if !mapsEqual(rels, wantRels) {
		t.Fatalf("im_relations rows %+v, want %+v", rels, wantRels)
	}

}

// checkScenarioQueries checks what the queries answer after the scenario; they fill the caches.
func checkScenarioQueries(ctx context.Context, t *testing.T, f *fixture, until time.Time) {
	t.Helper()
	s := f.store
	g := must[business.Group](t)(s.Group(ctx, f.tenant, 7))
	if g.Owner != 2 || g.MemberCount != 4 || g.Name != "seven" || g.Announcement != "hello all" || g.Topic != "grp7" ||
		g.Version != f.w.group(7).Version() || g.Dissolved() || g.CreatedAt.IsZero() {
		t.Fatalf("Group = %+v", g)
	}
	if st := must[domain.GroupSettings](t)(s.Settings(ctx, f.tenant, 7)); st != domain.DefaultGroupSettings() {
		t.Fatalf("Settings = %+v", st)
	}
	for uid, role := range map[domain.UserID]domain.Role{1: domain.RoleMember, 2: domain.RoleOwner, 3: domain.RoleMember, 4: "", 5: domain.RoleAdmin, 99: ""} {
		if got := must[domain.Role](t)(s.Role(ctx, f.tenant, 7, uid)); got != role {
			t.Errorf("Role(%d) = %q, want %q", uid, got, role)
		}
		if got := must[bool](t)(s.IsMember(ctx, f.tenant, 7, uid)); got != (role != "") {
			t.Errorf("IsMember(%d) = %v", uid, got)
		}
	}
	if got := must[time.Time](t)(s.MutedUntil(ctx, f.tenant, 7, 3)); !got.Equal(until) {
		t.Errorf("MutedUntil(3) = %v, want %v", got, until)
	}
	if got := must[time.Time](t)(s.MutedUntil(ctx, f.tenant, 7, 5)); !got.IsZero() {
		t.Errorf("MutedUntil(5) = %v, want zero", got)
	}
	checkUsers(t, "Friends(1)", must[[]domain.UserID](t)(s.Friends(ctx, f.tenant, 1)), 2)
	checkUsers(t, "Friends(2)", must[[]domain.UserID](t)(s.Friends(ctx, f.tenant, 2)), 1)
	checkUsers(t, "Blocklist(3)", must[[]domain.UserID](t)(s.Blocklist(ctx, f.tenant, 3)), 1)
	checkUsers(t, "Blocklist(1)", must[[]domain.UserID](t)(s.Blocklist(ctx, f.tenant, 1)))
	if !must[bool](t)(s.IsBlocked(ctx, f.tenant, 3, 1)) || must[bool](t)(s.IsBlocked(ctx, f.tenant, 1, 3)) {
		t.Error("IsBlocked: want 3 blocks 1 and not the reverse")
	}
	if !must[bool](t)(s.IsFriend(ctx, f.tenant, 2, 1)) || must[bool](t)(s.IsFriend(ctx, f.tenant, 3, 1)) {
		t.Error("IsFriend: want 1 and 2 friends, 1 and 3 not")
	}
	u := must[business.User](t)(s.User(ctx, f.tenant, 1))
	if u.Nickname != "alice" || u.Signature != "busy" || u.Version != 1 || u.Avatar != "https://img/u1" {
		t.Errorf("User(1) = %+v", u)
	}
	if n := must[int](t)(s.GroupSize(ctx, f.tenant, 7)); n != 4 {
		t.Errorf("GroupSize = %d", n)
	}
	for uid, want := range map[domain.UserID][]domain.GroupID{2: {7}, 4: nil} {
		if got := must[[]domain.GroupID](t)(s.UserGroups(ctx, f.tenant, uid)); !slices.Equal(got, want) {
			t.Errorf("UserGroups(%d) = %v, want %v", uid, got, want)
		}
	}
}

// checkScenarioKeys checks every cache entry the queries filled.
func checkScenarioKeys(ctx context.Context, t *testing.T, f *fixture, until time.Time) {
	t.Helper()
	checkSet(t, f, ctx, "group:{7}:members", "0", "1", "2", "3", "5")
	checkSet(t, f, ctx, "group:{7}:admins", "0", "2", "5")
	checkSet(t, f, ctx, "relation:friends:{1}", "0", "2")
	checkSet(t, f, ctx, "relation:friends:{2}", "0", "1")
	checkSet(t, f, ctx, "relation:blocklist:{3}", "0", "1")
	checkSet(t, f, ctx, "relation:blocklist:{1}", "0")
	muted := must[[]redis.Z](t)(f.rdb.ZRangeWithScores(ctx, f.key("group:{7}:muted"), 0, -1).Result())
	if len(muted) != 2 || muted[0].Member != "0" || muted[1].Member != "3" || int64(muted[1].Score) != until.UnixMilli() {
		t.Errorf("muted zset = %+v", muted)
	}
	prof := must[map[string]string](t)(f.rdb.HGetAll(ctx, f.key("group:{7}:profile")).Result())
	if prof["owner_id"] != "2" || prof["member_count"] != "4" || prof["name"] != "seven" || prof["status"] != "normal" {
		t.Errorf("profile hash = %v", prof)
	}
	set := must[map[string]string](t)(f.rdb.HGetAll(ctx, f.key("group:{7}:settings")).Result())
	if set["invite_policy"] != "member" || set["announce_policy"] != "admin" || set["join_approval"] != "0" || set["mute_all"] != "0" {
		t.Errorf("settings hash = %v", set)
	}
	if up := must[map[string]string](t)(f.rdb.HGetAll(ctx, f.key("user:{1}:profile")).Result()); up["nickname"] != "alice" {
		t.Errorf("user profile hash = %v", up)
	}
	for _, k := range []string{"group:{7}:profile", "group:{7}:members", "group:{7}:muted", "relation:blocklist:{1}"} {
		if ttl := f.rdb.PTTL(ctx, f.key(k)).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("%s TTL %v, want within the cache TTL", k, ttl)
		}
	}
}

func TestApplyTwiceAndReplaysChangeNothing(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	events := scenario(f.w, time.Now().Add(time.Hour))
	f.apply(ctx, t, events...)
	before := must[business.Summary](t)(f.store.Checksum(ctx, f.tenant, business.DefaultTables()))
	// Fill a few caches: a batch that changes nothing must not invalidate them.
	must[bool](t)(f.store.IsMember(ctx, f.tenant, 7, 3))
	must[business.Group](t)(f.store.Group(ctx, f.tenant, 7))

	again := f.apply(ctx, t, events...)
	if len(again.Invalidated) != 0 {
		t.Fatalf("second apply: invalidated %v", again.Invalidated)
	}
	// A manual replay carries new event ids: old to the rows all the same.
	replay := make([]domain.Envelope, len(events))
	for i, e := range events {
		e.EventID = uuid.Must(uuid.NewV7())
		replay[i] = e
	}
	r := f.apply(ctx, t, replay...)
	if r.Applied != len(replay) || len(r.Invalidated) != 0 {
		t.Fatalf("replay: %d applied, invalidated %v", r.Applied, r.Invalidated)
	}
	after := must[business.Summary](t)(f.store.Checksum(ctx, f.tenant, business.DefaultTables()))
	if before != after || before.Members.Rows != 5 || before.Relations.Rows != 4 {
		t.Fatalf("checksum changed: %+v -> %+v", before, after)
	}
	c := must[business.TableCounts](t)(f.store.Counts(ctx, f.tenant, business.DefaultTables()))
	if c.Groups != 1 || c.Users != 1 {
		t.Fatalf("counts %+v", c)
	}
	for _, k := range []string{"group:{7}:members", "group:{7}:profile"} {
		if f.rdb.Exists(ctx, f.key(k)).Val() != 1 {
			t.Errorf("cache %s dropped by a batch that changed nothing", k)
		}
	}
}

func TestOlderVersionAfterNewerIsIgnored(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	w := f.w
	base := concat(w.create(7, 1, "team"), w.join(7, 2))
	f.apply(ctx, t, base...)
	promote := w.setRole(7, 1, 2, domain.RoleAdmin) // membership v2
	demote := w.setRole(7, 1, 2, domain.RoleMember) // membership v3
	renamed := w.rename(7, 1, "renamed")            // group v4
	renamedAgain := w.rename(7, 1, "renamed again") // group v5
	f.apply(ctx, t, demote...)
	f.apply(ctx, t, renamedAgain...)
	res := f.apply(ctx, t, concat(promote, renamed)...) // late, older versions
	if res.Applied != 2 || len(res.Invalidated) != 0 {
		t.Fatalf("late events: applied %d, invalidated %v", res.Applied, res.Invalidated)
	}
	if r := must[domain.Role](t)(f.store.Role(ctx, f.tenant, 7, 2)); r != domain.RoleMember {
		t.Fatalf("role after a late promotion = %q, want member", r)
	}
	if g := must[business.Group](t)(f.store.Group(ctx, f.tenant, 7)); g.Name != "renamed again" || g.Version != 4 {
		t.Fatalf("group after a late rename = %+v", g)
	}
	if v := memberRows(ctx, t, f, 7)[2]; v.version != 3 || v.role != "member" {
		t.Fatalf("membership row %+v", v)
	}
}

func TestApplyRejectsEventsThatCannotApply(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	w := f.w
	created := w.create(7, 1, "team")
	renamed := w.rename(7, 1, "x")
	var ee *business.EventError

	_, err := f.store.Apply(ctx, f.tenant, group, business.DefaultTables(), renamed)
	if !errors.As(err, &ee) || !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("rename before create: %v, want an EventError wrapping ErrNotFound", err)
	}
	other := newWorld(t, domain.MustTenantID("someone_else")).create(8, 1, "x")
	_, err = f.store.Apply(ctx, f.tenant, group, business.DefaultTables(), other)
	if !errors.As(err, &ee) || !errors.Is(err, domain.ErrInvalid) || ee.Index != 0 {
		t.Fatalf("event of another tenant: %v", err)
	}
	forged := created[0]
	forged.StreamID = "group:8"
	_, err = f.store.Apply(ctx, f.tenant, group, business.DefaultTables(), []domain.Envelope{forged})
	if !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("stream id that does not match the payload: %v", err)
	}
	// Failed batches wrote nothing; other event types are ignored.
	topic := must[domain.Topic](t)(domain.GroupTopic(7))
	msg := must[domain.Envelope](t)(domain.NewEnvelope(f.tenant, domain.ReadMarksStreamID(topic, 1), 1,
		domain.MessageEventType(domain.TopicGroup, domain.ActionReadMarked), domain.Actor{},
		domain.ReadMarked{Topic: "grp7", User: 1, ReadSeq: 1}))
	res := f.apply(ctx, t, msg)
	c := must[business.TableCounts](t)(f.store.Counts(ctx, f.tenant, business.DefaultTables()))
	if res.Applied != 1 || c.Groups != 0 {
		t.Fatalf("after failures and a foreign event: applied %d, counts %+v", res.Applied, c)
	}
	if _, err := f.store.Apply(ctx, f.tenant, "", business.DefaultTables(), created); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("empty consumer group: %v", err)
	}
}

func checkUsers(t *testing.T, what string, got []domain.UserID, want ...domain.UserID) {
	t.Helper()
	if len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func checkSet(t *testing.T, f *fixture, ctx context.Context, rest string, want ...string) {
	t.Helper()
	if got := f.setOf(ctx, t, rest); !slices.Equal(got, want) {
		t.Errorf("redis %s = %v, want %v", rest, got, want)
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestLargeBatchSpansStatementChunks(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	events := f.w.create(7, 1, "big")
	for u := domain.UserID(2); u <= 700; u++ {
		events = append(events, f.w.join(7, u)...)
	}
	res := f.apply(ctx, t, events...)
	if res.Applied != len(events) {
		t.Fatalf("applied %d of %d", res.Applied, len(events))
	}
	c := must[business.TableCounts](t)(f.store.Counts(ctx, f.tenant, business.DefaultTables()))
	if c.Members != 700 {
		t.Fatalf("counts %+v", c)
	}
	if n := must[int](t)(f.store.MemberCount(ctx, f.tenant, 7)); n != 700 {
		t.Fatalf("member count %d", n)
	}
	// Leaves of rows that exist go through the update path, in chunks too.
	var leaves []domain.Envelope
	for u := domain.UserID(2); u <= 700; u += 2 {
		leaves = append(leaves, f.w.leave(7, u)...)
	}
	f.apply(ctx, t, leaves...)
	if again := f.apply(ctx, t, concat(events, leaves)...); len(again.Invalidated) != 0 {
		t.Fatalf("redelivery invalidated %v", again.Invalidated)
	}
	if n := must[int](t)(f.store.MemberCount(ctx, f.tenant, 7)); n != 350 {
		t.Fatalf("member count after leaves %d", n)
	}
	ids := must[[]domain.UserID](t)(func() ([]domain.UserID, error) {
		var out []domain.UserID
		cursor := ""
		for {
			page, next, err := f.store.Members(ctx, f.tenant, 7, cursor, 500)
			for _, m := range page {
				out = append(out, m.User)
			}
			if err != nil || next == "" {
				return out, err
			}
			cursor = next
		}
	}())
	if len(ids) != 350 || ids[0] != 1 || ids[1] != 3 || ids[349] != 699 {
		t.Fatalf("%d members listed, first %v", len(ids), ids[:3])
	}
	if !must[bool](t)(f.store.IsMember(ctx, f.tenant, 7, 699)) || must[bool](t)(f.store.IsMember(ctx, f.tenant, 7, 700)) {
		t.Fatal("membership after leaves")
	}
}
