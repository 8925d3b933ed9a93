package testenv

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// PipelineHook is a go-redis hook (Client.AddHook) that calls itself with the commands of each
// pipeline before they go to Redis; dials and single commands pass through.
type PipelineHook func(ctx context.Context, cmds []redis.Cmder)

// DialHook implements redis.Hook.
func (h PipelineHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h PipelineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

// ProcessPipelineHook implements redis.Hook.
func (h PipelineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h(ctx, cmds)
		return next(ctx, cmds)
	}
}
