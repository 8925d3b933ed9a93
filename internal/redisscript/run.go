package redisscript

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Call is one script invocation in a pipelined batch.
type Call struct {
	Script *redis.Script
	Keys   []string
	Args   []any
}

// Run sends every call as EVALSHA in one pipeline round trip, after the commands pre queues (pre
// may be nil). Calls the server answers with NOSCRIPT (its script cache was flushed or never had
// them) are sent again with EVAL in a second round trip, which also caches the script; a NOSCRIPT
// reply means the script did not run, so nothing runs twice, and scripts need not be idempotent.
// Each returned command carries its own result or error, in the order of calls.
func Run(ctx context.Context, rdb redis.Cmdable, calls []Call, pre func(redis.Pipeliner)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if pre != nil {
			pre(p)
		}
		for i, c := range calls {
			cmds[i] = c.Script.EvalSha(ctx, p, c.Keys, c.Args...)
		}
		return nil
	})
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds
	}
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, i := range again {
			cmds[i] = calls[i].Script.Eval(ctx, p, calls[i].Keys, calls[i].Args...)
		}
		return nil
	})
	return cmds
}

// FirstErr returns the first error among cmds, in order, or nil. redis.Nil (a script that
// returned nil) counts as an error, as it does for a pipeline's Exec.
func FirstErr(cmds []*redis.Cmd) error {
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}
