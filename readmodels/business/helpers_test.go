package business_test

import (
	"context"
	"database/sql"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

const group = "business-mysql-test"

// fixture is one test's tenant database, Redis prefix and store.
type fixture struct {
	router *tenantdb.Router
	rdb    *redis.Client
	prefix string
	store  *business.Store
	tenant domain.TenantID
	w      *world
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newRouter(t testing.TB) *tenantdb.Router {
	t.Helper()
	testenv.MySQLServer(t)
	r, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// newTenant provisions a tenant with a unique id; its database is dropped at cleanup.
func newTenant(t testing.TB, r *tenantdb.Router) domain.TenantID {
	t.Helper()
	tenant := domain.MustTenantID(testenv.UniqueName("biz"))
	testenv.DropMySQLDatabasesAtCleanup(t, r.DatabaseName(tenant))
	if err := r.Provision(testCtx(t), tenant); err != nil {
		t.Fatal(err)
	}
	return tenant
}

func setup(t testing.TB) (context.Context, *fixture) {
	t.Helper()
	f := &fixture{router: newRouter(t)}
	f.tenant = newTenant(t, f.router)
	f.rdb, f.prefix = testenv.Redis(t)
	f.store = newStore(t, f.router, f.rdb, f.prefix)
	f.w = newWorld(t, f.tenant)
	return testCtx(t), f
}

func newStore(t testing.TB, r *tenantdb.Router, rdb redis.UniversalClient, prefix string) *business.Store {
	t.Helper()
	s, err := business.NewStore(r, rdb, business.Config{KeyPrefix: prefix, CacheTTL: time.Minute, RedisBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mysqlOnly is a store over the same databases without Redis: what MySQL says.
func (f *fixture) mysqlOnly(t testing.TB) *business.Store {
	return newStore(t, f.router, nil, f.prefix)
}

// apply applies events to the live tables and fails the test on error.
func (f *fixture) apply(ctx context.Context, t testing.TB, events ...domain.Envelope) business.ApplyResult {
	t.Helper()
	res, err := f.store.ApplyBatch(ctx, f.tenant, group, business.DefaultTables(), events)
	if err != nil {
		t.Fatal(err)
	}
	if res.CacheErr != nil {
		t.Fatalf("cache invalidation: %v", res.CacheErr)
	}
	return res
}

func (f *fixture) db(ctx context.Context, t testing.TB) *sql.DB {
	t.Helper()
	db, err := f.router.DB(ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// key is a cache key of the fixture's tenant.
func (f *fixture) key(rest string) string { return f.prefix + f.tenant.String() + ":" + rest }

// setOf reads a cached set (sentinel included) as sorted decimal strings; nil when missing.
func (f *fixture) setOf(ctx context.Context, t testing.TB, rest string) []string {
	t.Helper()
	v, err := f.rdb.SMembers(ctx, f.key(rest)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(v) == 0 {
		return nil
	}
	sortNumeric(v)
	return v
}

func sortNumeric(v []string) {
	for i := 1; i < len(v); i++ {
		for j := i; j > 0; j-- {
			a, _ := strconv.ParseInt(v[j-1], 10, 64)
			b, _ := strconv.ParseInt(v[j], 10, 64)
			if a <= b {
				break
			}
			v[j-1], v[j] = v[j], v[j-1]
		}
	}
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// closedPortClient is a Redis client for a port nothing listens on.
func closedPortClient(t testing.TB) *redis.Client {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// world decides business events with the domain aggregates, as command handlers do, and keeps the
// folded states so later decisions see earlier ones.
type world struct {
	t         testing.TB
	tenant    domain.TenantID
	groups    map[domain.GroupID]*domain.GroupState
	members   map[[2]int64]*domain.MembershipState
	relations map[string]*domain.RelationState
	profiles  map[domain.UserID]*domain.ProfileState
}

func newWorld(t testing.TB, tenant domain.TenantID) *world {
	return &world{t: t, tenant: tenant, groups: map[domain.GroupID]*domain.GroupState{},
		members: map[[2]int64]*domain.MembershipState{}, relations: map[string]*domain.RelationState{},
		profiles: map[domain.UserID]*domain.ProfileState{}}
}

func (w *world) p(u domain.UserID) domain.Principal {
	return domain.Principal{Tenant: w.tenant, User: u}
}

func (w *world) group(g domain.GroupID) *domain.GroupState {
	if s, ok := w.groups[g]; ok {
		return s
	}
	s := must[domain.GroupState](w.t)(domain.NewGroupState(w.tenant, g))
	w.groups[g] = &s
	return &s
}

func (w *world) member(g domain.GroupID, u domain.UserID) *domain.MembershipState {
	k := [2]int64{int64(g), int64(u)}
	if s, ok := w.members[k]; ok {
		return s
	}
	s := must[domain.MembershipState](w.t)(domain.NewMembershipState(w.tenant, g, u))
	w.members[k] = &s
	return &s
}

func (w *world) relation(a, b domain.UserID) *domain.RelationState {
	id := must[string](w.t)(domain.RelationStreamID(a, b))
	if s, ok := w.relations[id]; ok {
		return s
	}
	s := must[domain.RelationState](w.t)(domain.NewRelationState(w.tenant, a, b))
	w.relations[id] = &s
	return &s
}

func (w *world) profile(u domain.UserID) *domain.ProfileState {
	if s, ok := w.profiles[u]; ok {
		return s
	}
	s := must[domain.ProfileState](w.t)(domain.NewProfileState(w.tenant, u))
	w.profiles[u] = &s
	return &s
}

// decide turns a decision into envelopes and folds them into the states.
func (w *world) decide(actor domain.UserID, pending []domain.PendingEvent, err error) []domain.Envelope {
	w.t.Helper()
	if err != nil {
		w.t.Fatalf("decision refused: %v", err)
	}
	if len(pending) == 0 {
		w.t.Fatal("decision decided nothing")
	}
	envs, err := domain.NewEnvelopes(w.tenant, domain.Actor{Type: domain.ActorUser, ID: actor.String()}, pending)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, e := range envs {
		if err := w.fold(e); err != nil {
			w.t.Fatalf("fold %s: %v", e.EventType, err)
		}
	}
	return envs
}

func (w *world) fold(e domain.Envelope) error {
	parts := strings.Split(e.StreamID, ":")
	id := func(i int) int64 { n, _ := strconv.ParseInt(parts[i], 10, 64); return n }
	switch parts[0] {
	case "group":
		return w.group(domain.GroupID(id(1))).Apply(e)
	case "member":
		return w.member(domain.GroupID(id(1)), domain.UserID(id(2))).Apply(e)
	case "relation":
		return w.relation(domain.UserID(id(1)), domain.UserID(id(2))).Apply(e)
	case "user":
		return w.profile(domain.UserID(id(1))).Apply(e)
	}
	w.t.Fatalf("unknown stream %s", e.StreamID)
	return nil
}

var now = time.Now

func (w *world) create(g domain.GroupID, owner domain.UserID, name string) []domain.Envelope {
	w.t.Helper()
	prof := must[domain.GroupProfile](w.t)(domain.NewGroupProfile(name, "https://img/"+name, "intro of "+name))
	ev, err := w.group(g).Create(w.p(owner), prof, domain.DefaultGroupSettings(), now())
	return w.decide(owner, ev, err)
}

func (w *world) join(g domain.GroupID, users ...domain.UserID) []domain.Envelope {
	w.t.Helper()
	var out []domain.Envelope
	for _, u := range users {
		ev, err := w.group(g).Join(w.p(u), *w.member(g, u), 0, now())
		out = append(out, w.decide(u, ev, err)...)
	}
	return out
}

func (w *world) setRole(g domain.GroupID, actor, target domain.UserID, r domain.Role) []domain.Envelope {
	w.t.Helper()
	ev, err := w.group(g).SetRole(w.p(actor), *w.member(g, actor), *w.member(g, target), r, now())
	return w.decide(actor, ev, err)
}

func (w *world) mute(g domain.GroupID, actor, target domain.UserID, until time.Time) []domain.Envelope {
	w.t.Helper()
	ev, err := w.group(g).Mute(w.p(actor), *w.member(g, actor), *w.member(g, target), until, now())
	return w.decide(actor, ev, err)
}

func (w *world) remove(g domain.GroupID, actor, target domain.UserID, ban bool) []domain.Envelope {
	w.t.Helper()
	ev, err := w.group(g).Remove(w.p(actor), *w.member(g, actor), *w.member(g, target), ban, now())
	return w.decide(actor, ev, err)
}

func (w *world) leave(g domain.GroupID, u domain.UserID) []domain.Envelope {
	w.t.Helper()
	ev, err := w.group(g).Leave(w.p(u), *w.member(g, u), now())
	return w.decide(u, ev, err)
}

func (w *world) transfer(g domain.GroupID, from, to domain.UserID) []domain.Envelope {
	w.t.Helper()
	ev, err := w.group(g).TransferOwnership(w.p(from), *w.member(g, from), *w.member(g, to), now())
	return w.decide(from, ev, err)
}

func (w *world) dissolve(g domain.GroupID, owner domain.UserID) []domain.Envelope {
	w.t.Helper()
	ev, err := w.group(g).Dissolve(w.p(owner), *w.member(g, owner), now())
	return w.decide(owner, ev, err)
}

func (w *world) rename(g domain.GroupID, actor domain.UserID, name string) []domain.Envelope {
	w.t.Helper()
	prof := must[domain.GroupProfile](w.t)(domain.NewGroupProfile(name, "", ""))
	ev, err := w.group(g).UpdateProfile(w.p(actor), *w.member(g, actor), prof, now())
	return w.decide(actor, ev, err)
}

func (w *world) settings(g domain.GroupID, actor domain.UserID, s domain.GroupSettings) []domain.Envelope {
	w.t.Helper()
	ev, err := w.group(g).UpdateSettings(w.p(actor), *w.member(g, actor), s, now())
	return w.decide(actor, ev, err)
}

func (w *world) announce(g domain.GroupID, actor domain.UserID, text string) []domain.Envelope {
	w.t.Helper()
	ev, err := w.group(g).UpdateAnnouncement(w.p(actor), *w.member(g, actor), text, now())
	return w.decide(actor, ev, err)
}

func (w *world) befriend(a, b domain.UserID) []domain.Envelope {
	w.t.Helper()
	ev, err := w.relation(a, b).RequestFriend(w.p(a), "hi from "+a.String(), now())
	out := w.decide(a, ev, err)
	ev, err = w.relation(a, b).AcceptFriend(w.p(b), now())
	return append(out, w.decide(b, ev, err)...)
}

func (w *world) requestFriend(a, b domain.UserID) []domain.Envelope {
	w.t.Helper()
	ev, err := w.relation(a, b).RequestFriend(w.p(a), "hello", now())
	return w.decide(a, ev, err)
}

func (w *world) unfriend(a, b domain.UserID) []domain.Envelope {
	w.t.Helper()
	ev, err := w.relation(a, b).RemoveFriend(w.p(a), now())
	return w.decide(a, ev, err)
}

func (w *world) block(by, peer domain.UserID) []domain.Envelope {
	w.t.Helper()
	ev, err := w.relation(by, peer).Block(w.p(by), now())
	return w.decide(by, ev, err)
}

func (w *world) unblock(by, peer domain.UserID) []domain.Envelope {
	w.t.Helper()
	ev, err := w.relation(by, peer).Unblock(w.p(by), now())
	return w.decide(by, ev, err)
}

func (w *world) nick(u domain.UserID, nickname, signature string) []domain.Envelope {
	w.t.Helper()
	prof := must[domain.UserProfile](w.t)(domain.NewUserProfile(nickname, "https://img/u"+u.String(), signature))
	ev, err := w.profile(u).Update(w.p(u), prof, now())
	return w.decide(u, ev, err)
}

func concat(lists ...[]domain.Envelope) []domain.Envelope {
	var out []domain.Envelope
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
