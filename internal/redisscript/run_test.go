package redisscript_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/internal/redisscript"
	"github.com/imledger/imledger/internal/testenv"
)

// In a pipeline mixing scripts with other commands, only the scripts the server answers NOSCRIPT
// are sent again (with EVAL): the other commands and the cached scripts run exactly once, and
// the handles the batch returned carry the retried results. A fresh script source stands in for
// a flushed cache: SCRIPT FLUSH would disturb other tests sharing this Redis.
func TestPipelinedRetriesOnlyNoscriptCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testenv.Redis(t)
	const incrSrc = "return redis.call('INCRBY', KEYS[1], ARGV[1])"
	cached := redis.NewScript(incrSrc)
	if err := cached.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	fresh := redis.NewScript(incrSrc + "\n-- " + prefix)
	freshRO := redis.NewScript("return redis.call('GET', KEYS[1])\n-- ro " + prefix)
	if exists, _ := rdb.ScriptExists(ctx, fresh.Hash(), freshRO.Hash()).Result(); len(exists) != 2 || exists[0] || exists[1] {
		t.Fatalf("fresh scripts unexpectedly cached: %v", exists)
	}
	k, plain := prefix+"counter", prefix+"plain"
	var a, b, ro *redis.Cmd
	var incr *redis.IntCmd
	err := redisscript.Pipelined(ctx, rdb, func(batch *redisscript.Batch) {
		a = batch.Eval(fresh, []string{k}, 7)
		incr = batch.P.Incr(ctx, plain)
		b = batch.Eval(cached, []string{k}, 3)
		ro = batch.EvalRO(freshRO, []string{plain})
	})
	if err != nil {
		t.Fatalf("Pipelined: %v", err)
	}
	if v, err := a.Int64(); err != nil || v != 10 {
		t.Errorf("retried script = %d, %v; want 10 (it runs after the cached one)", v, err)
	}
	if v, err := b.Int64(); err != nil || v != 3 {
		t.Errorf("cached script = %d, %v; want 3", v, err)
	}
	if v, err := ro.Text(); err != nil || v != "1" {
		t.Errorf("retried read-only script = %q, %v; want \"1\"", v, err)
	}
	if incr.Val() != 1 {
		t.Errorf("plain command result = %d, want 1", incr.Val())
	}
	if v := rdb.Get(ctx, k).Val(); v != "10" {
		t.Errorf("counter = %s, want 10: a script ran twice or not at all", v)
	}
	if v := rdb.Get(ctx, plain).Val(); v != "1" {
		t.Errorf("plain counter = %s, want 1: the plain command was sent again", v)
	}
	if exists, _ := rdb.ScriptExists(ctx, fresh.Hash(), freshRO.Hash()).Result(); len(exists) != 2 || !exists[0] || !exists[1] {
		t.Errorf("EVAL fallback did not cache the scripts: %v", exists)
	}
}

// The first failing command's error is returned, as a pipeline's Exec does, and a script error
// other than NOSCRIPT is not retried.
func TestPipelinedReturnsFirstError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testenv.Redis(t)
	bad := redis.NewScript("return redis.call('INCR', KEYS[1])\n-- " + prefix)
	k := prefix + "text"
	if err := rdb.Set(ctx, k, "not a number", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var cmd *redis.Cmd
	err := redisscript.Pipelined(ctx, rdb, func(batch *redisscript.Batch) {
		batch.P.Set(ctx, prefix+"ok", "1", 0)
		cmd = batch.Eval(bad, []string{k})
	})
	if err == nil || redis.HasErrorPrefix(err, "NOSCRIPT") || cmd.Err() != err {
		t.Fatalf("Pipelined error = %v, script error = %v; want the script's own error", err, cmd.Err())
	}
	if v := rdb.Get(ctx, k).Val(); v != "not a number" {
		t.Errorf("value = %q, changed by a failing script", v)
	}
}
