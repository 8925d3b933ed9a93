package hot

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/rediskeys"
)

// ExpireBefore removes from Redis the tenant's hot message snapshots sent before horizon, and
// their seqs from the topics' hot_msg_seqs, so no read serves history the tenant no longer keeps
// (retention). Snapshots live TTL from their send time, so there is something to remove only when
// TTL reaches past the horizon. Watermarks, last seqs and read marks stay: they are not history.
// It walks the tenant's topics with SCAN, so it costs a pass over the keyspace; it returns how
// many snapshots it removed. Errors: domain.ErrRetryable when Redis failed.
func (s *Store) ExpireBefore(ctx context.Context, tenant domain.TenantID, horizon time.Time) (int64, error) {
	const suffix = ":hot_msg_seqs"
	var (
		mu   sync.Mutex
		sets []string
	)
	err := rediskeys.Scan(ctx, s.rdb, s.cfg.Prefix+tenant.String()+":topic:*"+suffix, func(k string) {
		mu.Lock()
		sets = append(sets, k)
		mu.Unlock()
	})
	if err != nil {
		return 0, redisErr("hot: expire: scan", err)
	}
	var removed int64
	for _, set := range sets {
		n, err := s.expireTopic(ctx, strings.TrimSuffix(set, suffix), set, horizon)
		removed += n
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// expireTopic removes the snapshots of one topic (key prefix base) sent before horizon.
func (s *Store) expireTopic(ctx context.Context, base, set string, horizon time.Time) (int64, error) {
	seqs, err := s.rdb.ZRange(ctx, set, 0, -1).Result()
	if err != nil {
		return 0, redisErr("hot: expire: read seqs", err)
	}
	if len(seqs) == 0 {
		return 0, nil
	}
	metas := make([]*redis.StringCmd, len(seqs))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, seq := range seqs {
			metas[i] = p.HGet(ctx, base+":hot_msg:"+seq, "m")
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return 0, redisErr("hot: expire: read snapshots", err)
	}
	var old []string
	for i, seq := range seqs {
		var m Message
		raw, err := metas[i].Result()
		if err != nil || json.Unmarshal([]byte(raw), &m) != nil || m.SentAt.IsZero() {
			continue // expired already, or a tombstone without a snapshot: nothing to serve
		}
		if m.SentAt.Before(horizon) {
			old = append(old, seq)
		}
	}
	if len(old) == 0 {
		return 0, nil
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		members := make([]any, len(old))
		for i, seq := range old {
			p.Del(ctx, base+":hot_msg:"+seq)
			members[i] = seq
		}
		p.ZRem(ctx, set, members...)
		return nil
	})
	if err != nil {
		return 0, redisErr("hot: expire: remove "+strconv.Itoa(len(old))+" snapshots", err)
	}
	return int64(len(old)), nil
}
