package query

import (
	"context"
	"fmt"
	"math"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// Page sizes.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// Where a page came from.
const (
	SourceRedis = "redis"
	SourceMySQL = "mysql"
)

// HistoryQuery selects a page by seq. With AfterSeq > 0 the page is the lowest seqs above it
// (catching up; BeforeSeq may bound it); otherwise it is the highest seqs below BeforeSeq, or the
// latest messages when BeforeSeq is 0 too (scrolling back). Bounds are exclusive; 0 means unset,
// so the very first messages are reached by scrolling back.
type HistoryQuery struct {
	AfterSeq  int64 `json:"after_seq,string,omitempty"`
	BeforeSeq int64 `json:"before_seq,string,omitempty"`
	Limit     int   `json:"limit,omitempty"` // default DefaultLimit, at most MaxLimit
}

// HistoryPage is one page of history in ascending seq order.
type HistoryPage struct {
	Messages []Message `json:"messages"`
	// LastSeq is the highest seq the read model holds for the topic, so a client knows it has
	// caught up even when the last seqs were holes.
	LastSeq int64 `json:"last_seq,string"`
	// HasMore is true when the range holds more messages beyond this page: above it when
	// catching up with AfterSeq, below it otherwise.
	HasMore bool `json:"has_more"`
	// Source says which store answered: SourceRedis or SourceMySQL.
	Source string `json:"-"`
}

// History returns a page of topic's messages as viewer sees them: messages viewer deleted for
// themselves are left out, and recalled messages are placeholders without content or head.
// Authorization is the caller's job.
//
// The page comes from the Redis hot cache only when the cache holds all of it: every seq of the
// page's span is cached, or is a hole that MySQL confirms, no cached message was recalled behind
// the cache's back, and viewer deleted nothing in the span. Those checks are one MySQL query of
// index-only lookups, no message content; anything unsure reads the page from MySQL. A Redis
// failure is logged and answered from MySQL, and Redis is left alone for RedisBackoff. Errors: a bad query wraps domain.ErrInvalid; MySQL
// unreachable, domain.ErrRetryable; an unprovisioned tenant, domain.ErrNotFound.
func (r *Reader) History(ctx context.Context, tenant domain.TenantID, topic domain.Topic, viewer domain.UserID, q HistoryQuery) (HistoryPage, error) {
	if topic.IsZero() || q.AfterSeq < 0 || q.BeforeSeq < 0 || q.Limit < 0 {
		return HistoryPage{}, fmt.Errorf("history: %w", &domain.ValidationError{Field: "query", Reason: "bad_format", Detail: "a topic, non-negative seqs and limit"})
	}
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	q.Limit = min(q.Limit, MaxLimit)
	if h := r.hotStore(); h != nil && topic.Kind() == domain.TopicGroup {
		page, ok, err := r.historyFromHot(ctx, h, tenant, topic, viewer, q)
		if err != nil {
			r.redisFailed(ctx, tenant, "history of "+topic.String(), err)
		} else if ok {
			return page, nil
		}
	}
	return r.historyFromMySQL(ctx, tenant, topic, viewer, q)
}

func (r *Reader) historyFromMySQL(ctx context.Context, tenant domain.TenantID, topic domain.Topic, viewer domain.UserID, q HistoryQuery) (HistoryPage, error) {
	msgs, more, err := r.store.Page(ctx, tenant, r.tables, msgstore.PageQuery{
		Topic: topic, Viewer: viewer, AfterSeq: q.AfterSeq, BeforeSeq: q.BeforeSeq, Limit: q.Limit, Newest: q.AfterSeq == 0,
	})
	if err != nil {
		return HistoryPage{}, fmt.Errorf("history: %w", err)
	}
	// Read after the page, so LastSeq is never below a seq the page holds.
	last, err := r.store.LastSeq(ctx, tenant, r.tables, topic)
	if err != nil {
		return HistoryPage{}, fmt.Errorf("history: %w", err)
	}
	if msgs == nil {
		msgs = []Message{}
	}
	return HistoryPage{Messages: msgs, LastSeq: last, HasMore: more, Source: SourceMySQL}, nil
}

// historyFromHot returns the page from Redis when it is provably complete; ok is false when MySQL
// must answer. A non-nil error is a Redis failure.
func (r *Reader) historyFromHot(ctx context.Context, h *hot.Store, tenant domain.TenantID, topic domain.Topic, viewer domain.UserID, q HistoryQuery) (page HistoryPage, ok bool, err error) {
	newest := q.AfterSeq == 0
	lo, hi := q.AfterSeq+1, int64(math.MaxInt64)
	if q.BeforeSeq > 0 {
		hi = q.BeforeSeq - 1
	}
	// One entry beyond the page tells whether there is more.
	w, err := h.Window(ctx, tenant, topic, lo, hi, q.Limit+1, newest)
	if err != nil {
		return page, false, err
	}
	if !w.HasLast || !w.Complete {
		return page, false, nil
	}
	hi = min(hi, w.LastSeq)
	if hi < lo {
		// Nothing can be in range: the client has caught up.
		return HistoryPage{Messages: []Message{}, LastSeq: w.LastSeq, Source: SourceRedis}, true, nil
	}
	msgs := w.Messages
	for len(msgs) > 0 && msgs[len(msgs)-1].Seq > hi {
		msgs = msgs[:len(msgs)-1]
	}
	if len(msgs) == 0 {
		return page, false, nil
	}
	// The span the cache must account for runs from the range's edge to the page's far end; the
	// cached entry just beyond the page only says there is more.
	spanFrom, spanTo := lo, hi
	more := len(msgs) > q.Limit
	var beyond int64
	if more && newest {
		beyond = msgs[len(msgs)-q.Limit-1].Seq
		msgs = msgs[len(msgs)-q.Limit:]
		spanFrom = msgs[0].Seq
	} else if more {
		beyond = msgs[q.Limit].Seq
		msgs = msgs[:q.Limit]
		spanTo = msgs[len(msgs)-1].Seq
	}
	// A wide gap is an expired or uncached range far more often than a run of holes: skip the
	// confirmation and read MySQL.
	if gaps := spanTo - spanFrom + 1 - int64(len(msgs)); gaps > int64(q.Limit) {
		return page, false, nil
	}
	check := msgstore.HotCheck{Topic: topic, Viewer: viewer, From: spanFrom, To: spanTo, Beyond: beyond}
	for _, m := range msgs {
		check.Seqs = append(check.Seqs, m.Seq)
		if !m.Recalled() {
			check.Live = append(check.Live, m.Seq)
		}
	}
	res, err := r.store.CheckHot(ctx, tenant, r.tables, check)
	if err != nil || !res.OK() {
		// MySQL's own answer (or its error) comes from the MySQL path.
		return page, false, nil
	}
	return HistoryPage{Messages: msgs, LastSeq: w.LastSeq, HasMore: more, Source: SourceRedis}, true, nil
}
