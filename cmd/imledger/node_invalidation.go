package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/policy"
)

// redisInvalidation carries the send policy's invalidation keys between the nodes of a
// deployment over one Redis Pub/Sub channel (it is the policy's Publisher and Source). A message
// is the publishing node's id and then one key per line ("<tenant>/<stream id>"); a node skips
// its own messages, whose keys its Broadcaster already invalidated locally.
//
// Pub/Sub delivers at most once and only to subscribers connected at the time: a key published
// while a node is not subscribed is lost for that node. The Policy marks its whole cache stale
// before every subscription and trusts no entry longer than its TTL, which bounds the loss.
type redisInvalidation struct {
	rdb     redis.UniversalClient
	channel string
	node    string
}

var (
	_ policy.Publisher = redisInvalidation{}
	_ policy.Source    = redisInvalidation{}
)

// Publish sends keys in one message.
func (r redisInvalidation) Publish(ctx context.Context, keys []policy.Key) error {
	if len(keys) == 0 {
		return nil
	}
	var b strings.Builder
	b.WriteString(r.node)
	for _, k := range keys {
		b.WriteByte('\n')
		b.WriteString(k.String())
	}
	if err := r.rdb.Publish(ctx, r.channel, b.String()).Err(); err != nil {
		return fmt.Errorf("publish invalidation: %w", err)
	}
	return nil
}

// Subscribe subscribes to the channel and calls fn for every key other nodes publish until ctx
// ends or the connection fails; it returns nil when ctx ended. Malformed keys are skipped.
func (r redisInvalidation) Subscribe(ctx context.Context, fn func(policy.Key)) error {
	ps := r.rdb.Subscribe(ctx, r.channel)
	defer ps.Close()
	// A blocked receive does not watch ctx; closing the subscription ends it.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	defer stop()
	if _, err := ps.Receive(ctx); err != nil {
		return subscribeErr(ctx, err)
	}
	for {
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil {
			return subscribeErr(ctx, err)
		}
		lines := strings.Split(msg.Payload, "\n")
		if lines[0] == r.node {
			continue
		}
		for _, line := range lines[1:] {
			if k, err := policy.ParseKey(line); err == nil {
				fn(k)
			}
		}
	}
}

func subscribeErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("invalidation subscription: %w", err)
}
