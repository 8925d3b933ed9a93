package query

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/hot"
)

// Unread returns how many messages of topic user has not read: the topic's watermark (its last
// seq below which nothing may still arrive) minus the user's read seq, never negative (DESIGN §5;
// seq holes make it an upper bound). Both numbers come from Redis when cached there and from
// MySQL otherwise; a value read from MySQL is written back to Redis (max-only). A Redis failure
// is logged and answered from MySQL.
func (r *Reader) Unread(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) (int64, error) {
	c := r.cache(tenant)
	last, err := c.watermark(ctx, topic)
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
// watermarks come from Redis where cached and from MySQL (written back) where not.
func (r *Reader) UnreadTotal(ctx context.Context, tenant domain.TenantID, user domain.UserID) (int64, map[string]int64, error) {
	return r.unreadTotal(ctx, tenant, user, nil)
}

// unreadTotal is UnreadTotal over the topics keep accepts (every topic when keep is nil).
func (r *Reader) unreadTotal(ctx context.Context, tenant domain.TenantID, user domain.UserID, keep func(domain.Topic) bool) (int64, map[string]int64, error) {
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
		if keep != nil && !keep(tp) {
			continue
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
	last, err := c.lastSeqs(ctx, topics)
	if err != nil {
		return 0, nil, fmt.Errorf("unread total: %w", err)
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

// watermark is the topic's watermark from Redis, or from MySQL (written back) when not cached.
func (c *cacheUse) watermark(ctx context.Context, topic domain.Topic) (int64, error) {
	if c.hot != nil {
		n, found, err := c.hot.Watermark(ctx, c.tenant, topic)
		if err != nil {
			c.failed(ctx, "watermark", err)
		} else if found {
			return n, nil
		}
	}
	n, err := c.r.store.Watermark(ctx, c.tenant, c.r.tables, topic)
	if err != nil {
		return 0, err
	}
	return c.writeBackWatermark(ctx, topic, n), nil
}

// readSeq is user's read seq in topic from Redis, or from MySQL (written back) when not cached.
// A cached 0 is not trusted: a 1:1 message creates its receiver's field at 0 even when Redis has
// lost the receiver's read seqs (expired, restarted) and MySQL holds a higher one.
func (c *cacheUse) readSeq(ctx context.Context, user domain.UserID, topic domain.Topic) (int64, error) {
	if c.hot != nil {
		n, found, err := c.hot.ReadSeq(ctx, c.tenant, user, topic)
		if err != nil {
			c.failed(ctx, "read seq", err)
		} else if found && n > 0 {
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

// watermarks returns the cached watermarks of topics; an empty map when Redis is not usable.
func (c *cacheUse) watermarks(ctx context.Context, topics []domain.Topic) map[string]int64 {
	if c.hot == nil {
		return map[string]int64{}
	}
	out, err := c.hot.Watermarks(ctx, c.tenant, topics)
	if err != nil {
		c.failed(ctx, "watermarks", err)
		return map[string]int64{}
	}
	return out
}

// lastSeqs answers the watermark of each of topics: from Redis, else from MySQL, written back
// to Redis.
func (c *cacheUse) lastSeqs(ctx context.Context, topics []domain.Topic) (map[string]int64, error) {
	last := c.watermarks(ctx, topics)
	var missing []domain.Topic
	for _, t := range topics {
		if _, ok := last[t.String()]; !ok {
			missing = append(missing, t)
		}
	}
	fromMySQL, err := c.r.store.Watermarks(ctx, c.tenant, c.r.tables, missing)
	if err != nil {
		return nil, err
	}
	for _, t := range missing {
		last[t.String()] = c.writeBackWatermark(ctx, t, fromMySQL[t.String()])
	}
	return last, nil
}

// writeBackWatermark gives Redis a watermark read from MySQL and returns the higher of the two
// (Redis may have seen seqs MySQL has not); an empty topic (0) is not written, so the first
// message's projection starts it.
func (c *cacheUse) writeBackWatermark(ctx context.Context, topic domain.Topic, n int64) int64 {
	if c.hot == nil || n <= 0 {
		return n
	}
	w, err := c.hot.RaiseWatermark(ctx, c.tenant, topic, n)
	if err != nil {
		c.failed(ctx, "write back watermark", err)
		return n
	}
	return max(w, n)
}
