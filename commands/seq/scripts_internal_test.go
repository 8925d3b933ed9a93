package seq

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/internal/redisscript"
	"github.com/imledger/imledger/internal/testenv"
)

// A script missing from the server's cache (NOSCRIPT) is sent again with EVAL and runs once.
// A fresh script source stands in for a flushed cache: SCRIPT FLUSH would disturb other tests
// sharing this Redis.
func TestRunScriptsFallsBackToEval(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := testenv.Redis(t)
	a, err := New(rdb, Config{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	fresh := redis.NewScript(seedSrc + "\n-- " + prefix)
	k := prefix + "counter"
	calls := []scriptCall{{Script: fresh, Keys: []string{k}, Args: []any{7}}, {Script: seedScript, Keys: []string{k}, Args: []any{3}}}
	if exists, _ := rdb.ScriptExists(ctx, fresh.Hash()).Result(); len(exists) != 1 || exists[0] {
		t.Fatalf("fresh script unexpectedly cached: %v", exists)
	}
	cmds := redisscript.Run(ctx, a.rdb, calls, nil)
	for i, c := range cmds {
		if c.Err() != nil {
			t.Fatalf("call %d: %v", i, c.Err())
		}
	}
	if v, _ := cmds[0].Int64(); v != 7 {
		t.Errorf("fallback result = %d, want 7", v)
	}
	if v := rdb.Get(ctx, k).Val(); v != "7" {
		t.Errorf("counter = %s, want 7", v)
	}
	if exists, _ := rdb.ScriptExists(ctx, fresh.Hash()).Result(); len(exists) != 1 || !exists[0] {
		t.Errorf("EVAL fallback did not cache the script")
	}
}
