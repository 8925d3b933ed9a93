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
	// LastSeq is the topic's watermark in the store that served the page: every seq up to it is
	// a message or a final hole (a seq given up with a seq-skip marker), and the page holds no
	// seq above it. A client that has every message up to LastSeq has caught up; one that saw a
	// higher seq in a realtime frame asks again later, since a seq below that one may still come.
	LastSeq int64 `json:"last_seq,string"`
	// HasMore is true when the range holds more messages beyond this page, up to LastSeq: above
	// it when catching up with AfterSeq, below it otherwise.
	HasMore bool `json:"has_more"`
	// Source says which store answered: SourceRedis or SourceMySQL.
	Source string `json:"-"`
}

// History returns a page of topic's messages as viewer sees them: messages viewer deleted for
// themselves are left out, recalled messages are placeholders without content or head, and
// nothing above the topic's watermark is served (a seq that may still be filled below it would
// otherwise be skipped by a client catching up). Authorization is the caller's job.
//
// The page comes from the Redis hot cache only when the cache holds all of it: every seq of the
// page's span is a cached message or a cached seq-skip marker (a seq that holds neither is never
// taken for a hole), no cached message was recalled behind the cache's back, and viewer deleted
// nothing in the span. Those checks are one MySQL query of index-only lookups, no message
// content; anything unsure reads the page from MySQL. A Redis failure is logged and answered from
// MySQL, and Redis is left alone for RedisBackoff. Errors: a bad query wraps domain.ErrInvalid;
// MySQL unreachable, domain.ErrRetryable; an unprovisioned tenant, domain.ErrNotFound.
func (r *Reader) History(ctx context.Context, tenant domain.TenantID, topic domain.Topic, viewer domain.UserID, q HistoryQuery) (HistoryPage, error) {
	if topic.IsZero() || q.AfterSeq < 0 || q.BeforeSeq < 0 || q.Limit < 0 {
		return HistoryPage{}, fmt.Errorf("history: %w", &domain.ValidationError{Field: "query", Reason: "bad_format", Detail: "a topic, non-negative seqs and limit"})
	}
	if q.Limit == 0 {
		q.Limit = DefaultLimit
	}
	q.Limit = min(q.Limit, MaxLimit)
	h := r.hotStore()
	if h == nil || topic.Kind() != domain.TopicGroup {
		return r.historyFromMySQL(ctx, tenant, topic, viewer, q)
	}
	page, ok, unknown, err := r.historyFromHot(ctx, h, tenant, topic, viewer, q)
	switch {
	case err != nil:
		r.redisFailed(ctx, tenant, "history of "+topic.String(), err)
	case ok:
		return page, nil
	}
	page, err = r.historyFromMySQL(ctx, tenant, topic, viewer, q)
	if err == nil && unknown && page.LastSeq > 0 {
		// Redis does not know the topic's watermark (its state expired or predates watermarks):
		// give it MySQL's, so later pages can come from the cache.
		if _, werr := h.RaiseWatermark(ctx, tenant, topic, page.LastSeq); werr != nil {
			r.redisFailed(ctx, tenant, "write back watermark", werr)
		}
	}
	return page, err
}

func (r *Reader) historyFromMySQL(ctx context.Context, tenant domain.TenantID, topic domain.Topic, viewer domain.UserID, q HistoryQuery) (HistoryPage, error) {
	// Read first: seqs up to the watermark never change, so the page read after it is final.
	w, err := r.store.Watermark(ctx, tenant, r.tables, topic)
	if err != nil {
		return HistoryPage{}, fmt.Errorf("history: %w", err)
	}
	if w == 0 || q.AfterSeq >= w {
		return HistoryPage{Messages: []Message{}, LastSeq: w, Source: SourceMySQL}, nil
	}
	msgs, more, err := r.store.Page(ctx, tenant, r.tables, msgstore.PageQuery{
		Topic: topic, Viewer: viewer, AfterSeq: q.AfterSeq, BeforeSeq: q.BeforeSeq, UpTo: w, Limit: q.Limit, Newest: q.AfterSeq == 0,
	})
	if err != nil {
		return HistoryPage{}, fmt.Errorf("history: %w", err)
	}
	if msgs == nil {
		msgs = []Message{}
	}
	return HistoryPage{Messages: msgs, LastSeq: w, HasMore: more, Source: SourceMySQL}, nil
}

// cacheEntry is a seq the cache holds: a message, or a seq-skip marker when msg is nil.
type cacheEntry struct {
	seq int64
	msg *Message
}

// historyFromHot returns the page from Redis when it is provably complete; ok is false when MySQL
// must answer, and unknown tells that Redis does not know the topic's watermark. A non-nil error is
// a Redis failure.
func (r *Reader) historyFromHot(ctx context.Context, h *hot.Store, tenant domain.TenantID, topic domain.Topic, viewer domain.UserID, q HistoryQuery) (page HistoryPage, ok, unknown bool, err error) {
	newest := q.AfterSeq == 0
	lo, hi := q.AfterSeq+1, int64(math.MaxInt64)
	if q.BeforeSeq > 0 {
		hi = q.BeforeSeq - 1
	}
	// One message beyond the page tells whether there is more.
	w, err := r.window(ctx, h, tenant, topic, lo, hi, q.Limit+1, newest)
	if err != nil || !w.HasWatermark || !w.Complete {
		return page, false, err == nil && !w.HasWatermark, err
	}
	if w.Watermark < hi {
		hi = w.Watermark
		if hi < lo {
			// Nothing can be in range: the client has caught up.
			return HistoryPage{Messages: []Message{}, LastSeq: w.Watermark, Source: SourceRedis}, true, false, nil
		}
		if newest && lastSeq(w) > hi {
			// The newest entries are above the watermark: read the newest up to it instead.
			if w, err = r.window(ctx, h, tenant, topic, lo, hi, q.Limit+1, newest); err != nil || !w.Complete {
				return page, false, false, err
			}
		}
	}
	entries, msgs := entriesUpTo(mergeEntries(w), hi)
	if len(msgs) == 0 {
		return page, false, false, nil
	}
	sp := spanOf(msgs, lo, hi, q.Limit, newest)
	check, held := sp.check(entries, topic, viewer)
	// Every seq of the span must be a cached message or marker: a seq the cache lacks may be
	// evicted, expired, or not committed yet, and only MySQL can answer for it.
	if held != sp.to-sp.from+1 {
		return page, false, false, nil
	}
	res, err := r.store.CheckHot(ctx, tenant, r.tables, check)
	if err != nil || !res.OK() {
		// MySQL's own answer (or its error) comes from the MySQL path.
		return page, false, false, nil
	}
	return HistoryPage{Messages: sp.msgs, LastSeq: w.Watermark, HasMore: sp.more, Source: SourceRedis}, true, false, nil
}

// entriesUpTo drops the entries above hi and answers the rest with their messages.
func entriesUpTo(entries []cacheEntry, hi int64) ([]cacheEntry, []Message) {
	for len(entries) > 0 && entries[len(entries)-1].seq > hi {
		entries = entries[:len(entries)-1]
	}
	var msgs []Message
	for _, e := range entries {
		if e.msg != nil {
			msgs = append(msgs, *e.msg)
		}
	}
	return entries, msgs
}

// hotSpan is a page of cached messages and the span of seqs the cache must account for: from the
// range's edge to the page's far end. The cached message just beyond the page, beyond (0 when
// none), only says there is more.
type hotSpan struct {
	msgs             []Message
	more             bool
	from, to, beyond int64
}

// spanOf cuts the cached messages msgs of the range [lo, hi] to a page of limit: the newest
// ones when newest, else the oldest.
func spanOf(msgs []Message, lo, hi int64, limit int, newest bool) hotSpan {
	sp := hotSpan{msgs: msgs, more: len(msgs) > limit, from: lo, to: hi}
	if sp.more && newest {
		sp.beyond = msgs[len(msgs)-limit-1].Seq
		sp.msgs = msgs[len(msgs)-limit:]
		sp.from = sp.msgs[0].Seq
	} else if sp.more {
		sp.beyond = msgs[limit].Seq
		sp.msgs = msgs[:limit]
		sp.to = sp.msgs[len(sp.msgs)-1].Seq
	}
	return sp
}

// check is what MySQL must confirm of the span, from the cached entries: it answers the check
// and how many seqs of the span the cache holds.
func (sp hotSpan) check(entries []cacheEntry, topic domain.Topic, viewer domain.UserID) (msgstore.HotCheck, int64) {
	check := msgstore.HotCheck{Topic: topic, Viewer: viewer, From: sp.from, To: sp.to, Beyond: sp.beyond}
	var held int64
	for _, e := range entries {
		if e.seq < sp.from || e.seq > sp.to {
			continue
		}
		held++
		check.Seqs = append(check.Seqs, e.seq)
		if e.msg != nil && !e.msg.Recalled() {
			check.Live = append(check.Live, e.seq)
			check.Versions = append(check.Versions, e.msg.Version)
		}
	}
	return check, held
}

// maxWindowReads bounds how often historyFromHot widens a window that seq-skip markers filled.
const maxWindowReads = 3

// window reads a cache window of [lo, hi] that holds want messages, or every entry of the
// range: markers take slots of a window, so a window they filled is read again, wider.
func (r *Reader) window(ctx context.Context, h *hot.Store, tenant domain.TenantID, topic domain.Topic, lo, hi int64, want int, newest bool) (hot.Window, error) {
	fetch := want
	for i := 0; ; i++ {
		w, err := h.Window(ctx, tenant, topic, lo, hi, fetch, newest)
		if err != nil {
			return w, err
		}
		if len(w.Messages) >= want || len(w.Messages)+len(w.Skipped) < fetch {
			return w, nil
		}
		if i+1 == maxWindowReads {
			w.Complete = false // cannot tell what follows: MySQL answers
			return w, nil
		}
		fetch += want - len(w.Messages)
	}
}

// lastSeq is the highest seq of a window's entries.
func lastSeq(w hot.Window) int64 {
	var last int64
	if n := len(w.Messages); n > 0 {
		last = w.Messages[n-1].Seq
	}
	if n := len(w.Skipped); n > 0 {
		last = max(last, w.Skipped[n-1])
	}
	return last
}

// mergeEntries returns a window's messages and markers in seq order.
func mergeEntries(w hot.Window) []cacheEntry {
	out := make([]cacheEntry, 0, len(w.Messages)+len(w.Skipped))
	i, j := 0, 0
	for i < len(w.Messages) || j < len(w.Skipped) {
		if j == len(w.Skipped) || i < len(w.Messages) && w.Messages[i].Seq < w.Skipped[j] {
			out = append(out, cacheEntry{seq: w.Messages[i].Seq, msg: &w.Messages[i]})
			i++
		} else {
			out = append(out, cacheEntry{seq: w.Skipped[j]})
			j++
		}
	}
	return out
}
