package seq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Owner is the attempt that holds a pending claim: the node that took it, the start of that
// node's process (Instance, random per Allocator) and the attempt's Nonce, unique to the attempt.
//
// A pending claim is abandoned, and a retry may take it over at once (Request.TakeOver), when
// its attempt can no longer finish: the owner is this process and the attempt is no longer in
// flight here (the caller knows; see Mine), or the owner's process is dead: its node's
// heartbeat key has expired or names another start of the node (see Alive).
type Owner struct {
	Node     string
	Instance string
	Nonce    string
}

// IsZero reports whether the claim recorded no owner (a claim of an older version).
func (o Owner) IsZero() bool { return o.Nonce == "" }

// Mine reports whether o is an attempt of this process.
func (a *Allocator) Mine(o Owner) bool { return o.Instance == a.instance && o.Node == a.cfg.NodeID }

// NewNonce returns a nonce for a new attempt, unique across processes.
func (a *Allocator) NewNonce() string {
	return a.instance + "." + strconv.FormatUint(a.nonces.Add(1), 36)
}

// randomID returns 16 random hex digits.
func randomID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("seq: random id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// HeartbeatKey returns the key that says node is alive: <KeyPrefix>node:<node>:alive, holding
// the instance of the node's running process.
func (a *Allocator) HeartbeatKey(node string) string {
	return a.cfg.KeyPrefix + "node:" + node + ":alive"
}

// Beat refreshes this process's heartbeat key for HeartbeatTTL.
func (a *Allocator) Beat(ctx context.Context) error {
	if err := a.rdb.Set(ctx, a.HeartbeatKey(a.cfg.NodeID), a.instance, a.cfg.HeartbeatTTL).Err(); err != nil {
		return redisErr("heartbeat", err)
	}
	return nil
}

// retireScript deletes a heartbeat key only while it names this process.
var retireScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// Retire deletes this process's heartbeat key if it still names this process, so other nodes
// take over what it left pending at once instead of after HeartbeatTTL.
func (a *Allocator) Retire(ctx context.Context) error {
	if err := retireScript.Run(ctx, a.rdb, []string{a.HeartbeatKey(a.cfg.NodeID)}, a.instance).Err(); err != nil {
		return redisErr("retire heartbeat", err)
	}
	return nil
}

// Alive reports whether the process of o still beats: its node's heartbeat key exists and names
// o's instance. An error means it could not tell (treat the owner as alive).
func (a *Allocator) Alive(ctx context.Context, o Owner) (bool, error) {
	v, err := a.rdb.Get(ctx, a.HeartbeatKey(o.Node)).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return true, redisErr("read heartbeat", err)
	}
	return v == o.Instance, nil
}

// RunHeartbeat beats at once and then every HeartbeatTTL/3 until ctx ends, then retires the
// heartbeat. A failed beat is logged; after HeartbeatTTL without one, other nodes take this
// process's pending claims for abandoned, which is safe: the event store's idempotency index
// still lets only one attempt of a send commit.
func (a *Allocator) RunHeartbeat(ctx context.Context, log *slog.Logger) {
	tick := time.NewTicker(a.cfg.HeartbeatTTL / 3)
	defer tick.Stop()
	for {
		if err := a.Beat(ctx); err != nil && ctx.Err() == nil {
			log.WarnContext(ctx, "send heartbeat failed", slog.Any("error", err))
		}
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.HeartbeatTTL)
			defer cancel()
			if err := a.Retire(rctx); err != nil {
				log.WarnContext(rctx, "retire send heartbeat", slog.Any("error", err))
			}
			return
		case <-tick.C:
		}
	}
}
