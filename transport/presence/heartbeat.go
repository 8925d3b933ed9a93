package presence

import (
	"context"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
)

// heartbeatBatch is the most sessions refreshed in one Redis round trip.
const heartbeatBatch = 256

// Run refreshes, every TouchInterval/2, each session of this node that was not refreshed for
// TouchInterval, until ctx ends. With it a connection stays online while it is open, however
// rarely its client sends frames, and goes offline within TTL when this node dies. Redis
// failures are logged and counted; Run returns only ctx's error.
func (st *Store) Run(ctx context.Context) error {
	st.running.Add(1)
	defer st.running.Add(-1)
	tick := time.NewTicker(st.cfg.TouchInterval / 2)
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

// heartbeat refreshes the sessions that are due.
func (st *Store) heartbeat(ctx context.Context) {
	st.mu.Lock()
	all := make([]*Session, 0, len(st.sessions))
	for s := range st.sessions {
		all = append(all, s)
	}
	st.mu.Unlock()
	type work struct {
		s      *Session
		topics []domain.Topic
	}
	now := time.Now()
	var due []work
	for _, s := range all {
		if topics, ok := s.due(now); ok {
			due = append(due, work{s, topics})
		}
	}
	for len(due) > 0 {
		chunk := due[:min(len(due), heartbeatBatch)]
		due = due[len(chunk):]
		err := redisscript.Pipelined(ctx, st.rdb, func(b *redisscript.Batch) {
			for _, w := range chunk {
				w.s.writeRefresh(ctx, b, w.topics)
			}
		})
		if err != nil && ctx.Err() == nil {
			st.errs.WithLabelValues("heartbeat").Inc()
			st.log.WarnContext(ctx, "presence: heartbeat failed", "sessions", len(chunk), "err", err)
		}
	}
}
