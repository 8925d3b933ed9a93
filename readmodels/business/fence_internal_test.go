package business

import (
	"context"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// cacheOnly is a Store whose tests touch Redis only; its router never connects.
func cacheOnly(t *testing.T) (context.Context, *Store, *redis.Client, domain.TenantID) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	r, err := tenantdb.NewRouter(tenantdb.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(r, rdb, Config{KeyPrefix: prefix, CacheTTL: time.Minute, RedisBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx, s, rdb, domain.MustTenantID("t1")
}

func TestFillRefusedAfterAnInvalidationItRaced(t *testing.T) {
	t.Parallel()
	ctx, s, rdb, tenant := cacheOnly(t)
	key := s.keyspace(tenant).groupMembers(7)

	// A reader misses and notes the fence; before it fills, a writer commits and invalidates.
	seen := fenceSeen(rdb.Get(ctx, key+fenceSuffix))
	if err := s.invalidate(ctx, tenant, []string{key}); err != nil {
		t.Fatal(err)
	}
	s.fill(ctx, tenant, rdb, key, seen, "set", setArgs([]int64{1, 2})) // what MySQL said before the commit
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("a fill from a read older than the invalidation was stored")
	}
	// A reader that starts after the invalidation fills.
	seen = fenceSeen(rdb.Get(ctx, key+fenceSuffix))
	if seen == "" {
		t.Fatal("the invalidation set no fence")
	}
	s.fill(ctx, tenant, rdb, key, seen, "set", setArgs([]int64{1, 2, 3}))
	got, ok := parseSet(rdb.SMembers(ctx, key).Val())
	if !ok || !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("fresh fill stored %v (filled %v)", got, ok)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("filled entry TTL %v", ttl)
	}
	// An entry is never overwritten by a fill; only an invalidation removes it.
	s.fill(ctx, tenant, rdb, key, seen, "set", setArgs([]int64{9}))
	if got, _ := parseSet(rdb.SMembers(ctx, key).Val()); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("a second fill replaced the entry: %v", got)
	}
	// A writer's delete that lands after a fill from an old read removes it.
	if err := s.invalidate(ctx, tenant, []string{key}); err != nil {
		t.Fatal(err)
	}
	if rdb.Exists(ctx, key).Val() != 0 {
		t.Fatal("invalidation left the entry")
	}
}

func TestFillHandlesLargeEntries(t *testing.T) {
	t.Parallel()
	ctx, s, rdb, tenant := cacheOnly(t)
	ids := make([]int64, 2500)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	members := s.keyspace(tenant).groupMembers(1)
	s.fill(ctx, tenant, rdb, members, "", "set", setArgs(ids))
	if n := rdb.SCard(ctx, members).Val(); n != 2501 {
		t.Fatalf("set holds %d entries, want 2501", n)
	}
	muted := s.keyspace(tenant).groupMuted(1)
	args := []string{"0", sentinel}
	for i := 1; i <= 1200; i++ {
		args = append(args, strconv.Itoa(1000+i), strconv.Itoa(i))
	}
	s.fill(ctx, tenant, rdb, muted, "", "zset", args)
	if n := rdb.ZCard(ctx, muted).Val(); n != 1201 {
		t.Fatalf("zset holds %d entries, want 1201", n)
	}
	if sc := rdb.ZScore(ctx, muted, "1200").Val(); sc != 2200 {
		t.Fatalf("score of 1200 = %v", sc)
	}
}

func TestFailedInvalidationsAreRetried(t *testing.T) {
	t.Parallel()
	ctx, s, rdb, tenant := cacheOnly(t)
	key := s.keyspace(tenant).friends(5)
	if err := rdb.SAdd(ctx, key, sentinel, "6").Err(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := redis.NewClient(&redis.Options{Addr: l.Addr().String(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	_ = l.Close()
	defer down.Close()

	s.rdb = down
	if err := s.invalidate(ctx, tenant, []string{key}); err == nil {
		t.Fatal("invalidation against a dead Redis reported success")
	}
	if err := s.invalidate(ctx, tenant, nil); err == nil { // within the backoff: queued, not sent
		t.Fatal("invalidation within the backoff reported success")
	}
	if n := s.PendingInvalidations(); n != 1 {
		t.Fatalf("%d pending, want 1", n)
	}
	s.rdb = rdb
	s.redisDownUntil.Store(0)
	if err := s.invalidate(ctx, tenant, nil); err != nil {
		t.Fatal(err)
	}
	if s.PendingInvalidations() != 0 || rdb.Exists(ctx, key).Val() != 0 {
		t.Fatal("the pending invalidation was not retried")
	}
}
