package seq

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
)

var (
	//go:embed lua/allocate.lua
	allocateSrc string
	//go:embed lua/seed.lua
	seedSrc string
	//go:embed lua/reallocate.lua
	reallocateSrc string
	//go:embed lua/fail.lua
	failSrc string

	allocateScript   = redis.NewScript(allocateSrc)
	seedScript       = redis.NewScript(seedSrc)
	reallocateScript = redis.NewScript(reallocateSrc)
	failScript       = redis.NewScript(failSrc)
)

// scriptCall is one script invocation in a pipelined batch.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
}

// runScripts sends every call as EVALSHA in one pipeline round trip, after the commands pre
// queues (pre may be nil). Calls the server answers with NOSCRIPT (its script cache was flushed
// or never had them) are sent again with EVAL, which also caches the script; a NOSCRIPT reply
// means the script did not run, so nothing runs twice. Each returned command carries its own
// result or error.
func (a *Allocator) runScripts(ctx context.Context, calls []scriptCall, pre func(redis.Pipeliner)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if pre != nil {
			pre(p)
		}
		for i, c := range calls {
			cmds[i] = c.script.EvalSha(ctx, p, c.keys, c.args...)
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
	_, _ = a.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, i := range again {
			cmds[i] = calls[i].script.Eval(ctx, p, calls[i].keys, calls[i].args...)
		}
		return nil
	})
	return cmds
}

// retryableReplies are Redis error replies that describe a transient server state.
var retryableReplies = []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN",
	"READONLY", "NOREPLICAS", "MOVED", "ASK", "ERR max number of clients"}

// redisErr wraps a Redis failure for operation op. Connection failures, timeouts and transient
// server states become *domain.RetryableError; other error replies (a script bug) stay plain.
func redisErr(op string, err error) error {
	var reply redis.Error
	if errors.As(err, &reply) {
		msg := reply.Error()
		for _, p := range retryableReplies {
			if strings.HasPrefix(msg, p) {
				return domain.Retryable(op, err)
			}
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	return domain.Retryable(op, err)
}
