package hot_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
)

// redisState reads every key under prefix as "<key without prefix> <type>: <canonical value>
// ttl:<has ttl>", sorted.
func redisState(ctx context.Context, t *testing.T, rdb *redis.Client, prefix string) []string {
	t.Helper()
	var out []string
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		typ, err := rdb.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var v string
		switch typ {
		case "string":
			v = fmt.Sprintf("%q", rdb.Get(ctx, k).Val())
		case "hash":
			m := rdb.HGetAll(ctx, k).Val()
			fields := make([]string, 0, len(m))
			for f, x := range m {
				fields = append(fields, f+"="+x)
			}
			sort.Strings(fields)
			v = strings.Join(fields, ",")
		case "zset":
			v = fmt.Sprint(rdb.ZRangeWithScores(ctx, k, 0, -1).Val())
		default:
			t.Fatalf("key %s of type %s", k, typ)
		}
		ttl := rdb.PTTL(ctx, k).Val()
		out = append(out, fmt.Sprintf("%s %s: %s ttl:%v", strings.TrimPrefix(k, prefix), typ, v, ttl > 0))
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestBatchLeavesTheStateOfOneByOne: a batch that interleaves two groups and a 1:1 chat, with
// seqs out of order, a hole, a skip marker, a recall and edits between runs of sent events and
// read marks, leaves every key exactly as applying its events one at a time does: runs of sent
// events share a script and read-seq raises are made at the end of the batch without changing
// what any key holds.
func TestBatchLeavesTheStateOfOneByOne(t *testing.T) {
	t.Parallel()
	ctx, single, rdb, prefix1 := newStore(t, hot.Config{}, nil)
	_, batched, rdb2, prefix2 := newStore(t, hot.Config{}, nil)
	events := []domain.Envelope{
		rmtest.Sent(t, tenant, "grp7", 1, 10, "a"),
		rmtest.Sent(t, tenant, "grp8", 2, 11, "b"),
		rmtest.Sent(t, tenant, "grp7", 3, 10, "c"), // 2 missing for now
		rmtest.Sent(t, tenant, "p2p10_20", 1, 20, "d"),
		rmtest.Sent(t, tenant, "grp8", 1, 12, "e"),
		rmtest.ReadMarked(t, tenant, "grp7", 11, 1, 1),
		rmtest.Sent(t, tenant, "grp7", 2, 11, "f"),
		rmtest.Edited(t, tenant, "grp7", 1, 10, 2, "a2"),
		rmtest.Sent(t, tenant, "grp7", 4, 12, "g"),
		rmtest.Recalled(t, tenant, "grp8", 2, 11),
		rmtest.Skipped(t, tenant, "grp7", 5),
		rmtest.Sent(t, tenant, "grp7", 7, 10, "h"), // 6 missing: the watermark stops at 5
		rmtest.Sent(t, tenant, "grp8", 3, 11, "i"),
		rmtest.ReadMarked(t, tenant, "grp7", 10, 7, 7),
		rmtest.Sent(t, tenant, "p2p10_20", 2, 10, "j"),
	}
	apply(ctx, t, single, tenant, events...)
	if _, err := batched.ApplyBatch(ctx, tenant, events); err != nil {
		t.Fatal(err)
	}
	one, batch := redisState(ctx, t, rdb, prefix1), redisState(ctx, t, rdb2, prefix2)
	if strings.Join(one, "\n") != strings.Join(batch, "\n") {
		t.Fatalf("one by one:\n%s\n\nbatched:\n%s", strings.Join(one, "\n"), strings.Join(batch, "\n"))
	}
	if len(one) < 10 {
		t.Fatalf("only %d keys: the events were not applied", len(one))
	}
	if w, err := batched.RaiseWatermark(ctx, tenant, rmtest.Topic(t, "grp7"), 0); err != nil || w != 5 {
		t.Fatalf("grp7 watermark %d, %v; want 5", w, err)
	}
}
