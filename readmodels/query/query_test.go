package query_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
	"github.com/imledger/imledger/readmodels/msgstore"
	"github.com/imledger/imledger/readmodels/query"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

type fixture struct {
	router *tenantdb.Router
	store  *msgstore.Store
	hot    *hot.Store
	rdb    *redis.Client
	prefix string
	tenant domain.TenantID
	cached *query.Reader // Redis first
	mysql  *query.Reader // MySQL only
}

func setup(t *testing.T) (context.Context, *fixture) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	r := rmtest.Router(t)
	rdb, prefix := testenv.Redis(t)
	h, err := hot.NewStore(rdb, hot.Config{Prefix: prefix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := msgstore.NewStore(r)
	return ctx, &fixture{
		router: r, store: store, hot: h, rdb: rdb, prefix: prefix, tenant: rmtest.Tenant(t, r),
		cached: query.NewReader(store, h, nil), mysql: query.NewReader(store, nil, nil),
	}
}

// other returns a second tenant sharing the router and Redis.
func (f *fixture) other(t *testing.T) *fixture {
	g := *f
	g.tenant = rmtest.Tenant(t, f.router)
	return &g
}

// both applies events to MySQL and Redis, as the two projectors would.
func (f *fixture) both(ctx context.Context, t *testing.T, events ...domain.Envelope) {
	t.Helper()
	f.mysqlOnly(ctx, t, events...)
	f.redisOnly(ctx, t, events...)
}

func (f *fixture) mysqlOnly(ctx context.Context, t *testing.T, events ...domain.Envelope) {
	t.Helper()
	if _, err := f.store.Apply(ctx, f.tenant, "im.readmodel.messages", msgstore.DefaultTables(), events); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) redisOnly(ctx context.Context, t *testing.T, events ...domain.Envelope) {
	t.Helper()
	for _, e := range events {
		if err := f.hot.Apply(ctx, f.tenant, e); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) history(ctx context.Context, t *testing.T, r *query.Reader, topic string, viewer domain.UserID, q query.HistoryQuery) query.HistoryPage {
	t.Helper()
	p, err := r.History(ctx, f.tenant, rmtest.Topic(t, topic), viewer, q)
	if err != nil {
		t.Fatalf("history %s %+v: %v", topic, q, err)
	}
	return p
}

// seqs renders a page as "1,2,3".
func seqs(p query.HistoryPage) string {
	parts := make([]string, len(p.Messages))
	for i, m := range p.Messages {
		parts[i] = fmt.Sprint(m.Seq)
	}
	return strings.Join(parts, ",")
}

func contentOf(m readmodels.Message) string {
	var s string
	if m.Content == nil || json.Unmarshal(m.Content, &s) != nil {
		return "<nil>"
	}
	return s
}

func TestRecalledContentNeverComesBack(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	f.both(ctx, t, rmtest.Sent(t, f.tenant, "grp7", 1, 10, "secret"), rmtest.Sent(t, f.tenant, "grp7", 2, 20, "fine"))
	f.both(ctx, t, rmtest.Recalled(t, f.tenant, "grp7", 1, 10))
	f.both(ctx, t, rmtest.Edited(t, f.tenant, "grp7", 1, 10, 2, "edit after recall"))

	for _, c := range []struct {
		reader *query.Reader
		source string
	}{{f.cached, query.SourceRedis}, {f.mysql, query.SourceMySQL}} {
		p := f.history(ctx, t, c.reader, "grp7", 20, query.HistoryQuery{})
		if p.Source != c.source || seqs(p) != "1,2" || p.LastSeq != 2 || p.HasMore {
			t.Fatalf("%s: page %s from %s, last %d, more %v", c.source, seqs(p), p.Source, p.LastSeq, p.HasMore)
		}
		m := p.Messages[0]
		if m.Status != readmodels.StatusRecalled || m.Content != nil || m.Head != nil || m.Version != 2 {
			t.Fatalf("%s: recalled message %+v", c.source, m)
		}
		if b, _ := json.Marshal(p); strings.Contains(string(b), "secret") || strings.Contains(string(b), "edit after recall") {
			t.Fatalf("%s: page JSON shows recalled content: %s", c.source, b)
		}
	}
}

func TestRecallNotYetInRedisIsServedFromMySQL(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	f.both(ctx, t, rmtest.Sent(t, f.tenant, "grp7", 1, 10, "secret"), rmtest.Sent(t, f.tenant, "grp7", 2, 10, "x"))
	f.mysqlOnly(ctx, t, rmtest.Recalled(t, f.tenant, "grp7", 1, 10)) // the Redis projector lags
	p := f.history(ctx, t, f.cached, "grp7", 20, query.HistoryQuery{})
	if p.Source != query.SourceMySQL || p.Messages[0].Content != nil {
		t.Fatalf("stale cache served: source %s, content %s", p.Source, p.Messages[0].Content)
	}
}

// An edit the Redis projector has not applied yet is not served from the cache: a client that
// catches up takes the page as final and would keep the old content and version for good.
func TestEditNotYetInRedisIsServedFromMySQL(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	f.both(ctx, t, rmtest.Sent(t, f.tenant, "grp7", 1, 10, "typo"), rmtest.Sent(t, f.tenant, "grp7", 2, 10, "x"))
	f.mysqlOnly(ctx, t, rmtest.Edited(t, f.tenant, "grp7", 1, 10, 2, "fixed")) // the Redis projector lags
	for _, q := range []query.HistoryQuery{{}, {BeforeSeq: 2, Limit: 1}} {
		p := f.history(ctx, t, f.cached, "grp7", 20, q)
		if len(p.Messages) == 0 {
			t.Fatalf("%+v: empty page", q)
		}
		if m := p.Messages[0]; contentOf(m) != "fixed" || m.Version != 2 {
			t.Fatalf("%+v: stale edit served from %s: content %s, version %d", q, p.Source, m.Content, m.Version)
		}
	}
	// Once Redis has the edit too, the cache serves the page again.
	f.redisOnly(ctx, t, rmtest.Edited(t, f.tenant, "grp7", 1, 10, 2, "fixed"))
	if p := f.history(ctx, t, f.cached, "grp7", 20, query.HistoryQuery{}); p.Source != query.SourceRedis || contentOf(p.Messages[0]) != "fixed" {
		t.Fatalf("after Redis caught up: source %s, content %s", p.Source, p.Messages[0].Content)
	}
}

// A seq given up with a seq-skip marker is a final hole: pages step over it and last_seq goes
// past it, from Redis and from MySQL alike.
func TestHistoryAcrossASeqHole(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	for seq := int64(1); seq <= 10; seq++ {
		if seq != 5 {
			f.both(ctx, t, rmtest.Sent(t, f.tenant, "grp7", seq, 10, fmt.Sprint("m", seq)))
		} else {
			f.both(ctx, t, rmtest.Skipped(t, f.tenant, "grp7", seq))
		}
	}
	for _, c := range []struct {
		reader *query.Reader
		source string
	}{{f.cached, query.SourceRedis}, {f.mysql, query.SourceMySQL}} {
		// Catching up forwards from seq 1, three at a time, across the hole at 5.
		var got []string
		for after, i := int64(1), 0; ; i++ {
			p := f.history(ctx, t, c.reader, "grp7", 20, query.HistoryQuery{AfterSeq: after, Limit: 3})
			if p.Source != c.source || p.LastSeq != 10 {
				t.Fatalf("%s: after %d: from %s, last %d", c.source, after, p.Source, p.LastSeq)
			}
			got = append(got, seqs(p))
			if !p.HasMore || i > 10 {
				break
			}
			after = p.Messages[len(p.Messages)-1].Seq
		}
		if strings.Join(got, "|") != "2,3,4|6,7,8|9,10" {
			t.Fatalf("%s: forward pages %v", c.source, got)
		}
		p := f.history(ctx, t, c.reader, "grp7", 20, query.HistoryQuery{AfterSeq: 3, BeforeSeq: 8, Limit: 10})
		if seqs(p) != "4,6,7" || p.HasMore || p.Source != c.source {
			t.Fatalf("%s: between 3 and 8: %s more=%v from %s", c.source, seqs(p), p.HasMore, p.Source)
		}
		// Scrolling back from the latest.
		p = f.history(ctx, t, c.reader, "grp7", 20, query.HistoryQuery{Limit: 4})
		if seqs(p) != "7,8,9,10" || !p.HasMore {
			t.Fatalf("%s: latest: %s more=%v", c.source, seqs(p), p.HasMore)
		}
		p = f.history(ctx, t, c.reader, "grp7", 20, query.HistoryQuery{BeforeSeq: 7, Limit: 4})
		if seqs(p) != "2,3,4,6" || !p.HasMore || p.Source != c.source {
			t.Fatalf("%s: before 7: %s more=%v from %s", c.source, seqs(p), p.HasMore, p.Source)
		}
		p = f.history(ctx, t, c.reader, "grp7", 20, query.HistoryQuery{BeforeSeq: 2, Limit: 4})
		if seqs(p) != "1" || p.HasMore {
			t.Fatalf("%s: before 2: %s more=%v", c.source, seqs(p), p.HasMore)
		}
		// Caught up: nothing after the last seq, from Redis without asking MySQL.
		p = f.history(ctx, t, c.reader, "grp7", 20, query.HistoryQuery{AfterSeq: 10})
		if len(p.Messages) != 0 || p.HasMore || p.LastSeq != 10 || p.Messages == nil {
			t.Fatalf("%s: after the end: %+v", c.source, p)
		}
	}
}

func TestMissingSnapshotFallsBackToMySQL(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	for seq := int64(1); seq <= 6; seq++ {
		f.both(ctx, t, rmtest.Sent(t, f.tenant, "grp7", seq, 10, "m"))
	}
	// Seq 4 is evicted from Redis entirely (index and snapshot): a gap MySQL does not confirm.
	f.rdb.ZRem(ctx, f.prefix+f.tenant.String()+":topic:{grp7}:hot_msg_seqs", "4")
	f.rdb.Del(ctx, f.prefix+f.tenant.String()+":topic:{grp7}:hot_msg:4")
	p := f.history(ctx, t, f.cached, "grp7", 20, query.HistoryQuery{})
	if p.Source != query.SourceMySQL || seqs(p) != "1,2,3,4,5,6" {
		t.Fatalf("page %s from %s", seqs(p), p.Source)
	}
	// A page that does not reach the gap is still served from Redis.
	p = f.history(ctx, t, f.cached, "grp7", 20, query.HistoryQuery{Limit: 2})
	if p.Source != query.SourceRedis || seqs(p) != "5,6" || !p.HasMore {
		t.Fatalf("page above the gap: %s from %s", seqs(p), p.Source)
	}
}

func TestDeleteForMeHidesOnlyForThatUser(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	for seq := int64(1); seq <= 3; seq++ {
		f.both(ctx, t, rmtest.Sent(t, f.tenant, "grp7", seq, 10, "m"))
	}
	f.both(ctx, t, rmtest.Deleted(t, f.tenant, "grp7", 2, 20))
	for _, r := range []*query.Reader{f.cached, f.mysql} {
		p := f.history(ctx, t, r, "grp7", 20, query.HistoryQuery{})
		if seqs(p) != "1,3" || p.Source != query.SourceMySQL {
			t.Fatalf("user 20 sees %s from %s", seqs(p), p.Source)
		}
	}
	if p := f.history(ctx, t, f.cached, "grp7", 30, query.HistoryQuery{}); seqs(p) != "1,2,3" || p.Source != query.SourceRedis {
		t.Fatalf("user 30 sees %s from %s", seqs(p), p.Source)
	}
	// Outside the deleted seq the deleting user is served from Redis again.
	if p := f.history(ctx, t, f.cached, "grp7", 20, query.HistoryQuery{AfterSeq: 2}); seqs(p) != "3" || p.Source != query.SourceRedis {
		t.Fatalf("user 20 after seq 2 sees %s from %s", seqs(p), p.Source)
	}
	// The message just beyond a page counts as well: user 40 deleted seq 1, so the latest two
	// (2 and 3) are all there is for them.
	f.both(ctx, t, rmtest.Deleted(t, f.tenant, "grp7", 1, 40))
	if p := f.history(ctx, t, f.cached, "grp7", 40, query.HistoryQuery{Limit: 2}); seqs(p) != "2,3" || p.HasMore {
		t.Fatalf("user 40 latest two: %s more=%v", seqs(p), p.HasMore)
	}
	if p := f.history(ctx, t, f.cached, "grp7", 30, query.HistoryQuery{Limit: 2}); seqs(p) != "2,3" || !p.HasMore || p.Source != query.SourceRedis {
		t.Fatalf("user 30 latest two: %s more=%v from %s", seqs(p), p.HasMore, p.Source)
	}
}

func TestDirectTopicsComeFromMySQL(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	f.both(ctx, t, rmtest.Sent(t, f.tenant, "p2p10_20", 1, 10, "hi"), rmtest.Sent(t, f.tenant, "p2p10_20", 2, 20, "hello"))
	p := f.history(ctx, t, f.cached, "p2p10_20", 10, query.HistoryQuery{})
	if p.Source != query.SourceMySQL || seqs(p) != "1,2" || p.Messages[0].To != 20 || p.Messages[1].To != 10 {
		t.Fatalf("1:1 page %+v", p)
	}
}

func TestUnread(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	for seq := int64(1); seq <= 5; seq++ {
		f.both(ctx, t, rmtest.Sent(t, f.tenant, "grp7", seq, 10, "m"))
	}
	f.both(ctx, t, rmtest.ReadMarked(t, f.tenant, "grp7", 20, 2, 5))
	f.both(ctx, t, rmtest.Sent(t, f.tenant, "p2p20_30", 1, 30, "a"), rmtest.Sent(t, f.tenant, "p2p20_30", 2, 30, "b"))
	f.both(ctx, t, rmtest.Sent(t, f.tenant, "grp8", 1, 20, "own"))

	for name, r := range map[string]*query.Reader{"cached": f.cached, "mysql": f.mysql} {
		cases := []struct {
			user  domain.UserID
			topic string
			want  int64
		}{
			{20, "grp7", 3},     // last 5, read 2
			{10, "grp7", 0},     // own messages are read
			{20, "p2p20_30", 2}, // received, never read
			{30, "p2p20_30", 0},
			{20, "grp8", 0},
			{99, "grp7", 5}, // no read mark at all
		}
		for _, c := range cases {
			n, err := r.Unread(ctx, f.tenant, c.user, rmtest.Topic(t, c.topic))
			if err != nil || n != c.want {
				t.Errorf("%s: unread(%d, %s) = %d, %v; want %d", name, c.user, c.topic, n, err, c.want)
			}
		}
		total, per, err := r.UnreadTotal(ctx, f.tenant, 20)
		if err != nil || total != 5 || len(per) != 3 || per["grp7"] != 3 || per["p2p20_30"] != 2 || per["grp8"] != 0 {
			t.Errorf("%s: unread total %d %v %v", name, total, per, err)
		}
	}
	// A read mark the Redis projector has applied but MySQL not yet still counts.
	f.redisOnly(ctx, t, rmtest.ReadMarked(t, f.tenant, "grp7", 20, 4, 5))
	if total, _, _ := f.cached.UnreadTotal(ctx, f.tenant, 20); total != 3 {
		t.Fatalf("unread total after a newer cached read mark: %d, want 3", total)
	}
}

func TestUnreadReloadsExpiredRedisState(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	for seq := int64(1); seq <= 4; seq++ {
		f.mysqlOnly(ctx, t, rmtest.Sent(t, f.tenant, "grp7", seq, 10, "m")) // Redis never saw them
	}
	f.mysqlOnly(ctx, t, rmtest.ReadMarked(t, f.tenant, "grp7", 20, 1, 1))
	if n, err := f.cached.Unread(ctx, f.tenant, 20, rmtest.Topic(t, "grp7")); err != nil || n != 3 {
		t.Fatalf("unread %d %v, want 3", n, err)
	}
	if w, found, _ := f.hot.Watermark(ctx, f.tenant, rmtest.Topic(t, "grp7")); !found || w != 4 {
		t.Fatalf("watermark not written back: %d %v", w, found)
	}
	if read, found, _ := f.hot.ReadSeq(ctx, f.tenant, 20, rmtest.Topic(t, "grp7")); !found || read != 1 {
		t.Fatalf("read seq not written back: %d %v", read, found)
	}
}

// A 1:1 message gives its receiver a read-seq field of 0 in Redis; when Redis had lost the
// receiver's read seqs (expired after StateTTL, a restart), that 0 is not the read mark MySQL
// holds, and the topic's unread count does not start over from the first message.
func TestUnreadOfAReceiverWhoseRedisStateExpired(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	for seq := int64(1); seq <= 3; seq++ {
		f.mysqlOnly(ctx, t, rmtest.Sent(t, f.tenant, "p2p20_30", seq, 30, "m")) // Redis lost these
	}
	f.mysqlOnly(ctx, t, rmtest.ReadMarked(t, f.tenant, "p2p20_30", 20, 3, 3))
	f.both(ctx, t, rmtest.Sent(t, f.tenant, "p2p20_30", 4, 30, "new"))
	topic := rmtest.Topic(t, "p2p20_30")
	for name, r := range map[string]*query.Reader{"cached": f.cached, "mysql": f.mysql} {
		if n, err := r.Unread(ctx, f.tenant, 20, topic); err != nil || n != 1 {
			t.Errorf("%s: unread %d %v, want 1", name, n, err)
		}
		if total, _, err := r.UnreadTotal(ctx, f.tenant, 20); err != nil || total != 1 {
			t.Errorf("%s: unread total %d %v, want 1", name, total, err)
		}
	}
}

func TestTenantsSeeOnlyTheirOwnMessages(t *testing.T) {
	t.Parallel()
	ctx, a := setup(t)
	b := a.other(t)
	a.both(ctx, t, rmtest.Sent(t, a.tenant, "grp7", 1, 10, "a1"), rmtest.Sent(t, a.tenant, "p2p10_20", 1, 10, "a-direct"))
	b.both(ctx, t, rmtest.Sent(t, b.tenant, "grp7", 1, 10, "b1"), rmtest.Sent(t, b.tenant, "grp7", 2, 10, "b2"))
	b.both(ctx, t, rmtest.Deleted(t, b.tenant, "grp7", 1, 20), rmtest.ReadMarked(t, b.tenant, "grp7", 20, 2, 2))

	for name, r := range map[string]*query.Reader{"cached": a.cached, "mysql": a.mysql} {
		p := a.history(ctx, t, r, "grp7", 20, query.HistoryQuery{})
		if seqs(p) != "1" || contentOf(p.Messages[0]) != "a1" || p.LastSeq != 1 {
			t.Fatalf("%s: tenant a grp7: %s %q last %d", name, seqs(p), contentOf(p.Messages[0]), p.LastSeq)
		}
		if n, _ := r.Unread(ctx, a.tenant, 20, rmtest.Topic(t, "grp7")); n != 1 {
			t.Fatalf("%s: tenant a unread %d, want 1 (tenant b's read mark leaked?)", name, n)
		}
		total, per, _ := r.UnreadTotal(ctx, a.tenant, 20)
		if total != 1 || len(per) != 1 || per["p2p10_20"] != 1 {
			t.Fatalf("%s: tenant a unread total %d %v", name, total, per)
		}
		p = b.history(ctx, t, r, "grp7", 30, query.HistoryQuery{})
		if seqs(p) != "1,2" || contentOf(p.Messages[0]) != "b1" {
			t.Fatalf("%s: tenant b grp7: %s", name, seqs(p))
		}
		if p := b.history(ctx, t, r, "p2p10_20", 10, query.HistoryQuery{}); len(p.Messages) != 0 || p.LastSeq != 0 {
			t.Fatalf("%s: tenant b sees tenant a's 1:1 topic: %+v", name, p)
		}
	}
}

func TestRedisDownReadsMySQL(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	f.both(ctx, t, rmtest.Sent(t, f.tenant, "grp7", 1, 10, "m"), rmtest.Sent(t, f.tenant, "grp7", 2, 10, "m"))
	// A Redis that accepts connections and never answers: every command runs into the timeout.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = c.Close() })
		}
	}()
	hung := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), MaxRetries: -1, ReadTimeout: 400 * time.Millisecond, WriteTimeout: 400 * time.Millisecond})
	t.Cleanup(func() { _ = hung.Close() })
	h, err := hot.NewStore(hung, hot.Config{Prefix: f.prefix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := query.NewReader(f.store, h, nil)
	p, err := r.History(ctx, f.tenant, rmtest.Topic(t, "grp7"), 20, query.HistoryQuery{})
	if err != nil || p.Source != query.SourceMySQL || seqs(p) != "1,2" {
		t.Fatalf("history with Redis down: %+v %v", p, err)
	}
	// Within the backoff Redis is not asked again, so the timeout is not paid again.
	start := time.Now()
	if n, err := r.Unread(ctx, f.tenant, 20, rmtest.Topic(t, "grp7")); err != nil || n != 2 {
		t.Fatalf("unread with Redis down: %d %v", n, err)
	}
	if total, _, err := r.UnreadTotal(ctx, f.tenant, 10); err != nil || total != 0 {
		t.Fatalf("unread total with Redis down: %d %v", total, err)
	}
	if _, err := r.History(ctx, f.tenant, rmtest.Topic(t, "grp7"), 20, query.HistoryQuery{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 400*time.Millisecond {
		t.Fatalf("queries after a Redis failure took %v: Redis was asked again", d)
	}
}

func TestHistoryRejectsBadQueriesAndClampsLimit(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	for seq := int64(1); seq <= 205; seq++ {
		f.mysqlOnly(ctx, t, rmtest.Sent(t, f.tenant, "grp7", seq, 10, "m"))
	}
	if _, err := f.mysql.History(ctx, f.tenant, rmtest.Topic(t, "grp7"), 1, query.HistoryQuery{AfterSeq: -1}); err == nil {
		t.Fatal("negative after_seq accepted")
	}
	if p := f.history(ctx, t, f.mysql, "grp7", 1, query.HistoryQuery{}); len(p.Messages) != query.DefaultLimit {
		t.Fatalf("default page has %d messages", len(p.Messages))
	}
	if p := f.history(ctx, t, f.mysql, "grp7", 1, query.HistoryQuery{Limit: 1000}); len(p.Messages) != query.MaxLimit || !p.HasMore {
		t.Fatalf("clamped page has %d messages", len(p.Messages))
	}
}
