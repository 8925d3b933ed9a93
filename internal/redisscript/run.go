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

// Batch queues the commands of one pipeline: scripts through Eval and EvalRO, any other command
// on P directly.
type Batch struct {
	P       redis.Pipeliner
	ctx     context.Context
	scripts []queued
}

type queued struct {
	call Call
	ro   bool
	cmd  *redis.Cmd
}

// Eval queues script as EVALSHA. The returned command carries the script's result once
// Pipelined returns, also when it had to be sent again with EVAL.
func (b *Batch) Eval(script *redis.Script, keys []string, args ...any) *redis.Cmd {
	return b.queue(Call{script, keys, args}, false)
}

// EvalRO is Eval for a read-only script (EVALSHA_RO, and EVAL_RO on NOSCRIPT).
func (b *Batch) EvalRO(script *redis.Script, keys []string, args ...any) *redis.Cmd {
	return b.queue(Call{script, keys, args}, true)
}

func (b *Batch) queue(c Call, ro bool) *redis.Cmd {
	var cmd *redis.Cmd
	if ro {
		cmd = c.Script.EvalShaRO(b.ctx, b.P, c.Keys, c.Args...)
	} else {
		cmd = c.Script.EvalSha(b.ctx, b.P, c.Keys, c.Args...)
	}
	b.scripts = append(b.scripts, queued{c, ro, cmd})
	return cmd
}

// Pipelined sends the commands fn queues in one pipeline round trip, scripts as EVALSHA. Scripts
// the server answers with NOSCRIPT (its script cache was flushed or never had them) are sent
// again with EVAL in a second round trip, which also caches them; a NOSCRIPT reply means the
// script did not run, and the other commands are not sent again, so nothing runs twice and
// nothing need be idempotent. The commands fn got from the Batch carry their final result or
// error. Pipelined returns the first error among all commands in the order queued, as a
// pipeline's Exec does (redis.Nil included).
func Pipelined(ctx context.Context, rdb redis.Cmdable, fn func(*Batch)) error {
	var b *Batch
	all, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		b = &Batch{P: p, ctx: ctx}
		fn(b)
		return nil
	})
	var again []queued
	for _, q := range b.scripts {
		if redis.HasErrorPrefix(q.cmd.Err(), "NOSCRIPT") {
			again = append(again, q)
		}
	}
	if len(again) > 0 {
		retried := make([]*redis.Cmd, len(again))
		_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, q := range again {
				if q.ro {
					retried[i] = q.call.Script.EvalRO(ctx, p, q.call.Keys, q.call.Args...)
				} else {
					retried[i] = q.call.Script.Eval(ctx, p, q.call.Keys, q.call.Args...)
				}
			}
			return nil
		})
		for i, q := range again {
			q.cmd.SetVal(retried[i].Val())
			q.cmd.SetErr(retried[i].Err())
		}
	}
	for _, c := range all {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}

// Run sends every call as EVALSHA in one pipeline round trip, after the commands and scripts pre
// queues (pre may be nil), and sends again with EVAL those the server answers NOSCRIPT (see
// Pipelined).
// Each returned command carries its own result or error, in the order of calls.
func Run(ctx context.Context, rdb redis.Cmdable, calls []Call, pre func(*Batch)) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	_ = Pipelined(ctx, rdb, func(b *Batch) {
		if pre != nil {
			pre(b)
		}
		for i, c := range calls {
			cmds[i] = b.Eval(c.Script, c.Keys, c.Args...)
		}
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
