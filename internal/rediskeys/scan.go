// Package rediskeys walks the keys of a Redis deployment, a single server or a Cluster.
package rediskeys

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// scanCount is the COUNT hint of each SCAN call: SCAN walks the whole keyspace whatever the
// pattern, so it asks for many keys per round trip.
const scanCount = 10000

// Scan calls fn for every key matching pattern; on Redis Cluster it scans every master, and fn
// may then be called concurrently.
func Scan(ctx context.Context, rdb redis.UniversalClient, pattern string, fn func(string)) error {
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, scanCount).Iterator()
		for iter.Next(ctx) {
			fn(iter.Val())
		}
		return iter.Err()
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
	}
	return scan(ctx, rdb)
}
