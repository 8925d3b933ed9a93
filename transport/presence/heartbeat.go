package presence

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
)

// heartbeatBatch is the most sessions refreshed in one Redis round trip.
const heartbeatBatch = 256

// checkInterval is the longest time between two rounds of Run (TouchInterval/2 when shorter):
// each round looks whether Redis lost this node's presence and refreshes the sessions due.
const checkInterval = time.Second

// Run refreshes, every TouchInterval, each session of this node, until ctx ends. With it a
// connection stays online while it is open, however rarely its client sends frames, and goes
// offline within TTL when this node dies. Redis failures are logged and counted; Run returns
// only ctx's error.
//
// Run heals what Redis lost at its next round, within checkInterval: a session whose write
// failed (a refresh, or its login, join or touch) is written again then, and when this node's
// marker key (see keys.node) is gone, Redis was flushed, restarted without its data or away for
// longer than TTL, and every session is written again. Until then other nodes do not see this
// node's members, so messages of their topics do not reach it.
func (st *Store) Run(ctx context.Context) error {
	st.running.Add(1)
	defer st.running.Add(-1)
	tick := time.NewTicker(min(st.cfg.TouchInterval/2, checkInterval))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			st.heartbeat(ctx)
		}
	}
}

// mark sets this node's marker key, for TTL, and reports whether it was there already.
func (st *Store) mark(ctx context.Context) (existed bool, err error) {
	key := st.keys.node(st.cfg.NodeID)
	var n *redis.IntCmd
	_, err = st.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		n = p.Exists(ctx, key)
		p.Set(ctx, key, "1", st.cfg.TTL)
		return nil
	})
	return err == nil && n.Val() == 1, err
}

// heartbeat refreshes the sessions that are due, every one when Redis lost this node's marker
// (at the first round of a node there are none yet).
func (st *Store) heartbeat(ctx context.Context) {
	existed, err := st.mark(ctx)
	if err != nil {
		if ctx.Err() == nil {
			st.errs.WithLabelValues("heartbeat").Inc()
			st.log.WarnContext(ctx, "presence: heartbeat failed", "err", err)
		}
		return // the sessions' writes would fail too; they stay due for the next round
	}
	st.mu.Lock()
	all := make([]*Session, 0, len(st.sessions))
	for s := range st.sessions {
		all = append(all, s)
	}
	st.mu.Unlock()
	if !existed && len(all) > 0 {
		st.log.WarnContext(ctx, "presence: redis lost this node's presence; writing every session again", "sessions", len(all))
		for _, s := range all {
			s.markDue() // not under st.mu: a session's lock comes first
		}
	}
	now := time.Now()
	chunk := make([]work, 0, min(len(all), heartbeatBatch))
	for _, s := range all {
		// Each session picked stays locked until its refresh is written (see Session.wmu): a
		// logout waits for at most one round trip, and then wins.
		s.wmu.Lock()
		topics, ok := s.due(now)
		if !ok {
			s.wmu.Unlock()
			continue
		}
		chunk = append(chunk, work{s, topics})
		if len(chunk) == heartbeatBatch {
			st.refresh(ctx, chunk)
			chunk = chunk[:0]
		}
	}
	if len(chunk) > 0 {
		st.refresh(ctx, chunk)
	}
	st.refreshChannels(ctx, now, !existed)
}

// work is a session a heartbeat refreshes, with its topics.
type work struct {
	s      *Session
	topics []domain.Topic
}

// refresh writes chunk's sessions in one round trip and unlocks them.
func (st *Store) refresh(ctx context.Context, chunk []work) {
	defer func() {
		for _, w := range chunk {
			w.s.wmu.Unlock()
		}
	}()
	err := redisscript.Pipelined(ctx, st.rdb, func(b *redisscript.Batch) {
		for _, w := range chunk {
			w.s.writeRefresh(ctx, b, w.topics)
		}
	})
	if err != nil && ctx.Err() == nil {
		st.errs.WithLabelValues("heartbeat").Inc()
		st.log.WarnContext(ctx, "presence: heartbeat failed", "sessions", len(chunk), "err", err)
		for _, w := range chunk {
			w.s.markDue()
		}
	}
}
