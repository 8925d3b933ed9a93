package query

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/hot"
)

// Unread returns how many messages of topic user has not read: the topic's last seq minus the
// user's read seq, never negative (DESIGN §5; seq holes make it an upper bound). Both numbers
// come from Redis when cached there and from MySQL otherwise; a value read from MySQL is written
// back to Redis (max-only). A Redis failure is logged and answered from MySQL.
func (r *Reader) Unread(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) (int64, error) {
	c := r.cache(tenant)
	last, err := c.lastSeq(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("unread: %w", err)
	}
	read, err := c.readSeq(ctx, user, topic)
	if err != nil {
		return 0, fmt.Errorf("unread: %w", err)
	}
	return max(last-read, 0), nil
}

// UnreadTotal returns user's unread count summed over every topic the user has a read mark in
// (the topics they sent to, read, or received a 1:1 message in), and the count per topic name,
// zeros included. The topic list comes from MySQL; read seqs take the higher of MySQL and Redis,
// last seqs come from Redis where cached and from MySQL (written back) where not.
func (r *Reader) UnreadTotal(ctx context.Context, tenant domain.TenantID, user domain.UserID) (int64, map[string]int64, error) {
	marks, err := r.store.ReadMarks(ctx, tenant, r.tables, user)
	if err != nil {
		return 0, nil, fmt.Errorf("unread total: %w", err)
	}
	read := make(map[string]int64, len(marks))
	topics := make([]domain.Topic, 0, len(marks))
	for _, m := range marks {
		tp, err := domain.ParseTopic(m.Topic)
		if err != nil {
			continue // not a topic this model writes; nothing to count
		}
		topics = append(topics, tp)
		read[m.Topic] = m.ReadSeq
	}
	c := r.cache(tenant)
	for t, n := range c.readSeqs(ctx, user) {
		if _, ok := read[t]; ok {
			read[t] = max(read[t], n)
		}
	}
	last := c.lastSeqs(ctx, topics)
	var missing []domain.Topic
	for _, tp := range topics {
		if _, ok := last[tp.String()]; !ok {
			missing = append(missing, tp)
		}
	}
	fromMySQL, err := r.store.LastSeqs(ctx, tenant, r.tables, missing)
	if err != nil {
		return 0, nil, fmt.Errorf("unread total: %w", err)
	}
	for _, tp := range missing {
		last[tp.String()] = fromMySQL[tp.String()]
		c.writeBackLastSeq(ctx, tp, fromMySQL[tp.String()])
	}
	var total int64
	per := make(map[string]int64, len(topics))
	for _, tp := range topics {
		n := max(last[tp.String()]-read[tp.String()], 0)
		per[tp.String()] = n
		total += n
	}
	return total, per, nil
}

// cacheUse is the Redis side of one query. After a Redis failure it stops using Redis for the
// rest of the query (and the Reader for RedisBackoff), so an outage costs one timeout, not one
// per topic.
type cacheUse struct {
	r      *Reader
	hot    *hot.Store // nil: answer from MySQL only
	tenant domain.TenantID
}

func (r *Reader) cache(tenant domain.TenantID) *cacheUse {
	return &cacheUse{r: r, hot: r.hotStore(), tenant: tenant}
}

func (c *cacheUse) failed(ctx context.Context, what string, err error) {
	c.r.redisFailed(ctx, c.tenant, what, err)
	c.hot = nil
}

// lastSeq is the topic's last seq from Redis, or from MySQL (written back) when not cached.
func (c *cacheUse) lastSeq(ctx context.Context, topic domain.Topic) (int64, error) {
	if c.hot != nil {
		n, found, err := c.hot.LastSeq(ctx, c.tenant, topic)
		if err != nil {
			c.failed(ctx, "last seq", err)
		} else if found {
			return n, nil
		}
	}
	n, err := c.r.store.LastSeq(ctx, c.tenant, c.r.tables, topic)
	if err != nil {
		return 0, err
	}
	c.writeBackLastSeq(ctx, topic, n)
	return n, nil
}

// readSeq is user's read seq in topic from Redis, or from MySQL (written back) when not cached.
func (c *cacheUse) readSeq(ctx context.Context, user domain.UserID, topic domain.Topic) (int64, error) {
	if c.hot != nil {
		n, found, err := c.hot.ReadSeq(ctx, c.tenant, user, topic)
		if err != nil {
			c.failed(ctx, "read seq", err)
		} else if found {
			return n, nil
		}
	}
	m, found, err := c.r.store.ReadMarkOf(ctx, c.tenant, c.r.tables, user, topic)
	if err != nil {
		return 0, err
	}
	if found && c.hot != nil {
		if err := c.hot.RaiseReadSeq(ctx, c.tenant, user, topic, m.ReadSeq); err != nil {
			c.failed(ctx, "write back read seq", err)
		}
	}
	return m.ReadSeq, nil
}

// readSeqs returns the user's cached read seqs; none when Redis is not usable.
func (c *cacheUse) readSeqs(ctx context.Context, user domain.UserID) map[string]int64 {
	if c.hot == nil {
		return nil
	}
	out, err := c.hot.ReadSeqs(ctx, c.tenant, user)
	if err != nil {
		c.failed(ctx, "read seqs", err)
		return nil
	}
	return out
}

// lastSeqs returns the cached last seqs of topics; an empty map when Redis is not usable.
func (c *cacheUse) lastSeqs(ctx context.Context, topics []domain.Topic) map[string]int64 {
	if c.hot == nil {
		return map[string]int64{}
	}
	out, err := c.hot.LastSeqs(ctx, c.tenant, topics)
	if err != nil {
		c.failed(ctx, "last seqs", err)
		return map[string]int64{}
	}
	return out
}

// writeBackLastSeq caches a last seq read from MySQL; an empty topic (0) is not cached, so the
// first message's projection sets it.
func (c *cacheUse) writeBackLastSeq(ctx context.Context, topic domain.Topic, n int64) {
	if c.hot == nil || n <= 0 {
		return
	}
	if err := c.hot.RaiseLastSeq(ctx, c.tenant, topic, n); err != nil {
		c.failed(ctx, "write back last seq", err)
	}
}
