package query_test

import (
	"testing"

	"github.com/imledger/imledger/readmodels/internal/rmtest"
	"github.com/imledger/imledger/readmodels/query"
)

// A seq that is missing but not given up (a send on another node that has not committed yet)
// is never taken for a hole: history stops below it and last_seq stays below it, from Redis and
// from MySQL, so a client catching up asks again and gets the seq when it comes; unread counts
// up to it. Once the seq commits (or its marker does), everything above it is served.
func TestHistoryStopsBelowAHoleThatMayStillFill(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	for _, seq := range []int64{1, 2, 3, 4, 6, 7, 8} {
		f.both(ctx, t, rmtest.Sent(t, f.tenant, "grp7", seq, 10, "m"))
	}
	for name, r := range map[string]*query.Reader{"cached": f.cached, "mysql": f.mysql} {
		for _, q := range []query.HistoryQuery{{AfterSeq: 0}, {AfterSeq: 2}, {Limit: 2}, {BeforeSeq: 8}} {
			p := f.history(ctx, t, r, "grp7", 20, q)
			if p.LastSeq != 4 || p.HasMore && q.Limit == 0 {
				t.Fatalf("%s %+v: last_seq %d more %v, want 4", name, q, p.LastSeq, p.HasMore)
			}
			for _, m := range p.Messages {
				if m.Seq > 4 {
					t.Fatalf("%s %+v: page %s serves seq %d above the open hole", name, q, seqs(p), m.Seq)
				}
			}
		}
		if p := f.history(ctx, t, r, "grp7", 20, query.HistoryQuery{AfterSeq: 4}); len(p.Messages) != 0 || p.LastSeq != 4 {
			t.Fatalf("%s: after 4: %s last %d", name, seqs(p), p.LastSeq)
		}
		if n, err := r.Unread(ctx, f.tenant, 20, rmtest.Topic(t, "grp7")); err != nil || n != 4 {
			t.Fatalf("%s: unread %d, %v; want 4", name, n, err)
		}
	}
	f.both(ctx, t, rmtest.Sent(t, f.tenant, "grp7", 5, 10, "late"))
	for name, r := range map[string]*query.Reader{"cached": f.cached, "mysql": f.mysql} {
		p := f.history(ctx, t, r, "grp7", 20, query.HistoryQuery{AfterSeq: 4})
		if seqs(p) != "5,6,7,8" || p.LastSeq != 8 || p.HasMore {
			t.Fatalf("%s: after the late seq: %s last %d more %v", name, seqs(p), p.LastSeq, p.HasMore)
		}
	}
	if p := f.history(ctx, t, f.cached, "grp7", 20, query.HistoryQuery{AfterSeq: 4}); p.Source != query.SourceRedis {
		t.Fatalf("a complete cached page came from %s", p.Source)
	}
}

// Markers in the cache count for a page's span, but a page whose window they fill is read from
// MySQL, which can tell whether more messages follow.
func TestCachedPageWithMarkers(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	f.both(ctx, t, rmtest.Sent(t, f.tenant, "grp7", 1, 10, "a"), rmtest.Skipped(t, f.tenant, "grp7", 2),
		rmtest.Skipped(t, f.tenant, "grp7", 3), rmtest.Sent(t, f.tenant, "grp7", 4, 10, "d"))
	p := f.history(ctx, t, f.cached, "grp7", 20, query.HistoryQuery{})
	if seqs(p) != "1,4" || p.LastSeq != 4 || p.HasMore || p.Source != query.SourceRedis {
		t.Fatalf("page %s last %d more %v from %s", seqs(p), p.LastSeq, p.HasMore, p.Source)
	}
	p = f.history(ctx, t, f.cached, "grp7", 20, query.HistoryQuery{AfterSeq: 0, Limit: 2})
	if seqs(p) != "1,4" || p.HasMore {
		t.Fatalf("limit 2: %s more %v from %s", seqs(p), p.HasMore, p.Source)
	}
	p = f.history(ctx, t, f.cached, "grp7", 20, query.HistoryQuery{AfterSeq: 1, Limit: 1})
	if seqs(p) != "4" || p.HasMore {
		t.Fatalf("after 1, limit 1: %s more %v from %s", seqs(p), p.HasMore, p.Source)
	}
}

// A topic whose Redis watermark is unknown (its state expired, or it predates watermarks) is read
// from MySQL once, which gives Redis the watermark; later pages come from the cache again.
func TestHistoryWritesTheWatermarkBackToRedis(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	for seq := int64(1); seq <= 3; seq++ {
		f.both(ctx, t, rmtest.Sent(t, f.tenant, "grp7", seq, 10, "m"))
	}
	base := f.prefix + f.tenant.String() + ":topic:{grp7}:"
	if err := f.rdb.Del(ctx, base+"proj_wm", base+"proj_seen").Err(); err != nil {
		t.Fatal(err)
	}
	if p := f.history(ctx, t, f.cached, "grp7", 20, query.HistoryQuery{}); p.Source != query.SourceMySQL || p.LastSeq != 3 {
		t.Fatalf("without a cached watermark: from %s, last %d", p.Source, p.LastSeq)
	}
	if p := f.history(ctx, t, f.cached, "grp7", 20, query.HistoryQuery{}); p.Source != query.SourceRedis || seqs(p) != "1,2,3" || p.LastSeq != 3 {
		t.Fatalf("after the write-back: %s from %s, last %d", seqs(p), p.Source, p.LastSeq)
	}
}
