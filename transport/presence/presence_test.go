package presence_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/presence"
)

var acme = domain.MustTenantID("acme")

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// env is two nodes' stores over one Redis key prefix.
type env struct {
	rdb    *redis.Client
	prefix string
	a, b   *presence.Store
}

func newEnv(t *testing.T, cfg presence.Config) *env {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	cfg.KeyPrefix = prefix
	e := &env{rdb: rdb, prefix: prefix}
	e.a = newStore(t, rdb, cfg, "node-a")
	e.b = newStore(t, rdb, cfg, "node-b")
	return e
}

func newStore(t *testing.T, rdb redis.UniversalClient, cfg presence.Config, node string) *presence.Store {
	t.Helper()
	cfg.NodeID = node
	s, err := presence.New(presence.Deps{Redis: rdb}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func login(t *testing.T, s *presence.Store, user domain.UserID, sid string) *presence.Session {
	t.Helper()
	sess, err := s.Login(testCtx(t), presence.LoginInfo{Tenant: acme, User: user, SessionID: sid, UA: "test/1"})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func get(t *testing.T, s *presence.Store, user domain.UserID) presence.Presence {
	t.Helper()
	p, err := s.Get(testCtx(t), acme, user)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoginVisibleFromOtherNodeAndLastSessionMarksOffline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, presence.Config{})
	ctx := testCtx(t)
	if p := get(t, e.b, 7); p.Online || p.Status != presence.StatusOffline || !p.LastSeen.IsZero() {
		t.Fatalf("never seen user = %+v", p)
	}
	before := time.Now().Add(-time.Second)
	s1 := login(t, e.a, 7, "s1")
	s2 := login(t, e.a, 7, "s2")
	p := get(t, e.b, 7)
	if !p.Online || p.Status != presence.StatusOnline || p.Sessions != 2 || p.Node != "node-a" || p.LastSeen.Before(before) {
		t.Fatalf("from node b after two logins on a: %+v", p)
	}
	if n := e.rdb.SCard(ctx, e.prefix+"acme:presence:node:node-a:users").Val(); n != 1 {
		t.Errorf("node-a users set has %d members, want 1", n)
	}

	if err := s1.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	if p := get(t, e.b, 7); !p.Online || p.Sessions != 1 {
		t.Fatalf("after one of two sessions closed: %+v", p)
	}
	if n := e.rdb.SCard(ctx, e.prefix+"acme:presence:node:node-a:users").Val(); n != 1 {
		t.Errorf("node-a users set has %d members with one session left, want 1", n)
	}
	if err := s2.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	p = get(t, e.b, 7)
	if p.Online || p.Status != presence.StatusOffline || p.Sessions != 0 || p.LastSeen.Before(before) || p.LastSeen.After(time.Now().Add(time.Second)) {
		t.Fatalf("after the last session closed: %+v", p)
	}
	if n := e.rdb.SCard(ctx, e.prefix+"acme:presence:node:node-a:users").Val(); n != 0 {
		t.Errorf("node-a users set has %d members after the last logout", n)
	}
	if ttl := e.rdb.PTTL(ctx, e.prefix+"acme:presence:user:{7}").Val(); ttl < 24*time.Hour {
		t.Errorf("offline presence hash TTL = %s; last_seen_at should outlive the session", ttl)
	}
	if err := s2.Logout(ctx); err != nil {
		t.Errorf("second Logout: %v", err)
	}
}

func TestCrashedNodeUsersLapseWithinTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, presence.Config{TTL: time.Second, TouchInterval: 200 * time.Millisecond})
	ctx := testCtx(t)
	grp, _ := domain.GroupTopic(5)
	crashed := login(t, e.a, 1, "crash-1")
	if err := crashed.Join(ctx, grp); err != nil {
		t.Fatal(err)
	}
	alive := login(t, e.b, 2, "alive-2")
	if err := alive.Join(ctx, grp); err != nil {
		t.Fatal(err)
	}
	loggedIn := time.Now()
	if nodes, _ := e.b.NodesForTopic(ctx, acme, grp); !slices.Equal(sorted(nodes), []string{"node-a", "node-b"}) {
		t.Fatalf("nodes = %v", nodes)
	}
	// node-a stops without a logout; node-b keeps touching its session.
	deadline := time.Now().Add(3 * time.Second)
	var p presence.Presence
	for time.Now().Before(deadline) {
		if err := alive.Touch(ctx); err != nil {
			t.Fatal(err)
		}
		if p = get(t, e.b, 1); !p.Online {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	lapsed := time.Since(loggedIn)
	if p.Online || p.Status != presence.StatusOffline {
		t.Fatalf("crashed user still %+v after %s", p, lapsed)
	}
	if lapsed > 1500*time.Millisecond {
		t.Errorf("crashed user went offline after %s, want within the 1s TTL", lapsed)
	}
	if p.LastSeen.IsZero() || p.LastSeen.After(loggedIn.Add(100*time.Millisecond)) {
		t.Errorf("crashed user's last seen = %s, want its last activity (~%s)", p.LastSeen, loggedIn)
	}
	if q := get(t, e.a, 2); !q.Online {
		t.Errorf("touched user on the live node went offline: %+v", q)
	}
	// The topic's node list lapses with the same TTL; under load its check may run a moment
	// after the user's.
	var nodes []string
	for {
		nodes, _ = e.b.NodesForTopic(ctx, acme, grp)
		if slices.Equal(nodes, []string{"node-b"}) || time.Since(loggedIn) > 2*time.Second {
			break
		}
		if err := alive.Touch(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !slices.Equal(nodes, []string{"node-b"}) {
		t.Errorf("nodes %s after node-a's last activity = %v, want [node-b]", time.Since(loggedIn), nodes)
	}
}

func TestTouchIsRateLimitedAndRefreshes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, presence.Config{TTL: 2 * time.Second, TouchInterval: 300 * time.Millisecond})
	ctx := testCtx(t)
	s := login(t, e.a, 3, "s")
	key := e.prefix + "acme:presence:user:{3}:sessions"
	first := e.rdb.ZScore(ctx, key, "s").Val()
	for range 20 {
		if err := s.Touch(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.rdb.ZScore(ctx, key, "s").Val(); got != first {
		t.Fatalf("touches within TouchInterval moved the deadline from %v to %v", first, got)
	}
	time.Sleep(350 * time.Millisecond)
	if err := s.Touch(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.rdb.ZScore(ctx, key, "s").Val(); got < first+300 {
		t.Fatalf("touch after TouchInterval left the deadline at %v (was %v)", got, first)
	}
	// Touching keeps the user online well past one TTL.
	end := time.Now().Add(3 * time.Second)
	for time.Now().Before(end) {
		_ = s.Touch(ctx)
		time.Sleep(100 * time.Millisecond)
	}
	if p := get(t, e.b, 3); !p.Online {
		t.Fatalf("touched session lapsed: %+v", p)
	}
}

func TestTopicMembersPerNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, presence.Config{})
	ctx := testCtx(t)
	grp, _ := domain.GroupTopic(9)
	members := e.prefix + "acme:topic:{grp9}:online_members"
	nodeA := e.prefix + "acme:topic:{grp9}:node:node-a:online_members"

	a1 := login(t, e.a, 1, "a1")     // user 1 on node a
	a1bis := login(t, e.a, 1, "a1b") // user 1 again on node a
	b1 := login(t, e.b, 1, "b1")     // user 1 on node b too
	a2 := login(t, e.a, 2, "a2")     // user 2 on node a
	for _, s := range []*presence.Session{a1, a1bis, b1, a2} {
		if err := s.Join(ctx, grp); err != nil {
			t.Fatal(err)
		}
	}
	check := func(step string, wantNodes, wantMembers, wantNodeA []string) {
		t.Helper()
		nodes, err := e.a.NodesForTopic(ctx, acme, grp)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sorted(nodes), wantNodes) {
			t.Errorf("%s: nodes = %v, want %v", step, nodes, wantNodes)
		}
		if got := sorted(e.rdb.ZRange(ctx, members, 0, -1).Val()); !slices.Equal(got, wantMembers) {
			t.Errorf("%s: online_members = %v, want %v", step, got, wantMembers)
		}
		if got := sorted(e.rdb.ZRange(ctx, nodeA, 0, -1).Val()); !slices.Equal(got, wantNodeA) {
			t.Errorf("%s: node-a online_members = %v, want %v", step, got, wantNodeA)
		}
	}
	check("all joined", []string{"node-a", "node-b"}, []string{"1", "2"}, []string{"1", "2"})

	if err := a1.Leave(ctx, grp); err != nil {
		t.Fatal(err)
	}
	check("one of user 1's two node-a sessions left", []string{"node-a", "node-b"}, []string{"1", "2"}, []string{"1", "2"})

	if err := a1bis.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	check("user 1 gone from node a, still on node b", []string{"node-a", "node-b"}, []string{"1", "2"}, []string{"2"})

	if err := a2.Leave(ctx, grp); err != nil {
		t.Fatal(err)
	}
	check("node a has no members", []string{"node-b"}, []string{"1"}, nil)

	if err := b1.Leave(ctx, grp); err != nil {
		t.Fatal(err)
	}
	check("everyone left", nil, nil, nil)
	if err := b1.Leave(ctx, grp); err != nil {
		t.Errorf("leaving twice: %v", err)
	}
}

func TestRedisDownAnswersUnknown(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = dead.Close() })
	s := newStore(t, dead, presence.Config{}, "node-x")
	p, err := s.Get(testCtx(t), acme, 1)
	if err != nil || p.Status != presence.StatusUnknown || p.Online {
		t.Fatalf("Get with Redis down = %+v, %v; want status unknown, nil error", p, err)
	}
	sess, err := s.Login(testCtx(t), presence.LoginInfo{Tenant: acme, User: 1, SessionID: "x"})
	if !errors.Is(err, domain.ErrRetryable) || sess == nil {
		t.Fatalf("Login with Redis down = %v, %v; want a usable session and a retryable error", sess, err)
	}
	if _, err := s.NodesForTopic(testCtx(t), acme, mustTopic(t, "grp1")); !errors.Is(err, domain.ErrRetryable) {
		t.Errorf("NodesForTopic with Redis down = %v, want retryable", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Get(ctx, acme, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a cancelled context = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  presence.Config
		want string
	}{
		{name: "ok", cfg: presence.Config{NodeID: "n1"}},
		{name: "no node", cfg: presence.Config{}, want: "node_id"},
		{name: "braces in prefix", cfg: presence.Config{NodeID: "n1", KeyPrefix: "{im}:"}, want: "key_prefix"},
		{name: "tiny ttl", cfg: presence.Config{NodeID: "n1", TTL: time.Millisecond}, want: "ttl"},
		{name: "touch not below ttl", cfg: presence.Config{NodeID: "n1", TTL: time.Minute, TouchInterval: time.Minute}, want: "touch_interval"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: Validate = %v, want %q", tt.name, err, tt.want)
		}
	}
}

func sorted(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func mustTopic(t *testing.T, s string) domain.Topic {
	t.Helper()
	topic, err := domain.ParseTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	return topic
}

// TestRunKeepsQuietSessionsOnline: a session that never touches stays online while Run runs,
// a logged-out one is not brought back, and everything lapses within TTL once Run stops (the
// node died).
func TestRunKeepsQuietSessionsOnline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, presence.Config{TTL: time.Second, TouchInterval: 300 * time.Millisecond})
	ctx, cancel := context.WithCancel(testCtx(t))
	grp, _ := domain.GroupTopic(3)
	quiet := login(t, e.a, 1, "quiet")
	if err := quiet.Join(ctx, grp); err != nil {
		t.Fatal(err)
	}
	gone := login(t, e.a, 2, "gone")
	if err := gone.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.a.Run(ctx) }()
	time.Sleep(2500 * time.Millisecond)
	if p := get(t, e.b, 1); !p.Online {
		t.Fatalf("quiet session lapsed while Run was running: %+v", p)
	}
	if nodes, _ := e.b.NodesForTopic(testCtx(t), acme, grp); !slices.Equal(nodes, []string{"node-a"}) {
		t.Errorf("nodes = %v, want [node-a]", nodes)
	}
	if p := get(t, e.b, 2); p.Online {
		t.Errorf("logged-out session came back: %+v", p)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v", err)
	}
	stopped := time.Now()
	for get(t, e.b, 1).Online {
		if time.Since(stopped) > 1500*time.Millisecond {
			t.Fatal("still online 1.5 s after Run stopped, TTL is 1 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestNodesForTopicsAnswersEachTopicInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, presence.Config{})
	ctx := testCtx(t)
	both, _ := domain.GroupTopic(21)
	onlyB, _ := domain.GroupTopic(22)
	nobody, _ := domain.GroupTopic(23)
	a := login(t, e.a, 31, "multi-a")
	b := login(t, e.b, 32, "multi-b")
	for _, j := range []struct {
		s *presence.Session
		t domain.Topic
	}{{a, both}, {b, both}, {b, onlyB}} {
		if err := j.s.Join(ctx, j.t); err != nil {
			t.Fatal(err)
		}
	}
	other := domain.MustTenantID("other")
	lists, err := e.a.NodesForTopics(ctx, []presence.TopicRef{{Tenant: acme, Topic: nobody}, {Tenant: acme, Topic: both}, {Tenant: other, Topic: both}, {Tenant: acme, Topic: onlyB}})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{nil, {"node-a", "node-b"}, nil, {"node-b"}}
	if len(lists) != len(want) {
		t.Fatalf("got %d lists for 4 topics", len(lists))
	}
	for i := range want {
		if !slices.Equal(sorted(lists[i]), want[i]) {
			t.Errorf("topic %d: nodes = %v, want %v", i, lists[i], want[i])
		}
	}
}

// markedCtx marks the calls whose Redis traffic countHook counts.
type markedCtx struct{}

// countHook counts the commands and pipelines sent under a context marked with markedCtx.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if ctx.Value(markedCtx{}) != nil {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if ctx.Value(markedCtx{}) != nil {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// While Run refreshes the node's sessions, Touch costs no Redis round trip of its own, and a
// session whose client keeps sending frames still stays online: Run refreshes it with the
// others, in batches.
func TestTouchLeavesTheRefreshToRun(t *testing.T) {
	t.Parallel()
	rdb, prefix := testenv.Redis(t)
	hook := &countHook{}
	rdb.AddHook(hook)
	cfg := presence.Config{KeyPrefix: prefix, TTL: time.Second, TouchInterval: 200 * time.Millisecond}
	a, b := newStore(t, rdb, cfg, "node-a"), newStore(t, rdb, cfg, "node-b")
	ctx := testCtx(t)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	s := login(t, a, 4, "s")
	marked := context.WithValue(ctx, markedCtx{}, true)
	end := time.Now().Add(2500 * time.Millisecond) // 2.5 TTLs
	for time.Now().Before(end) {
		if err := s.Touch(marked); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := hook.n.Load(); n != 0 {
		t.Errorf("Touch sent %d Redis calls of its own while Run was refreshing the node's sessions, want 0", n)
	}
	if p := get(t, b, 4); !p.Online {
		t.Fatalf("a session touched while Run ran lapsed: %+v", p)
	}
}
