package userchan_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/userchan"
)

var acme = domain.MustTenantID("acme")

func newLog(t *testing.T, cfg userchan.Config) (*userchan.Log, *redis.Client, string) {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	cfg.KeyPrefix = prefix
	l, err := userchan.NewLog(rdb, func(t domain.TenantID, u domain.UserID) string {
		return prefix + t.String() + ":presence:user:{" + u.String() + "}:chan_nodes"
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l, rdb, prefix
}

// appendN appends n read items for user, one batch, and returns what the log answered.
func appendN(t *testing.T, l *userchan.Log, user domain.UserID, n int) userchan.Appended {
	t.Helper()
	items := make([]userchan.Item, n)
	for i := range items {
		items[i] = userchan.Item{What: userchan.WhatRead, Topic: mustTopic(t, "grp1"), ReadSeq: int64(i + 1), At: time.Now()}
	}
	out, err := l.Append(testenv.Context(t), acme, []userchan.Batch{{User: user, Items: items}})
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

func mustTopic(t *testing.T, s string) domain.Topic {
	t.Helper()
	tp, err := domain.ParseTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

func seqs(p userchan.Page) []int64 {
	out := []int64{}
	for _, e := range p.Entries {
		out = append(out, e.Seq)
	}
	return out
}

// TestLogNumbersItemsPerUserAndServesThemAfterASeq checks the numbering (from 1 per user, in the
// order given, the seq first in each item's JSON), paging after a seq, the head, and that the
// append reports the user's channel nodes.
func TestLogNumbersItemsPerUserAndServesThemAfterASeq(t *testing.T) {
	t.Parallel()
	l, rdb, prefix := newLog(t, userchan.Config{})
	ctx := testenv.Context(t)
	if err := rdb.ZAdd(ctx, prefix+"acme:presence:user:{7}:chan_nodes", redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "node-a"},
		redis.Z{Score: 1, Member: "node-gone"}).Err(); err != nil {
		t.Fatal(err)
	}
	a := appendN(t, l, 7, 3)
	if len(a.Seqs) != 3 || a.Seqs[0] != 1 || a.Seqs[2] != 3 || len(a.Epoch) != 16 {
		t.Fatalf("first append: %+v", a)
	}
	if len(a.Nodes) != 1 || a.Nodes[0] != "node-a" {
		t.Fatalf("nodes %v, want node-a alone (node-gone lapsed)", a.Nodes)
	}
	var first map[string]any
	if err := json.Unmarshal(a.Bodies[0], &first); err != nil || first["seq"] != "1" || first["epoch"] != a.Epoch || first["what"] != "read" ||
		first["topic"] != "grp1" || first["read_seq"] != "1" {
		t.Fatalf("item %s: %v", a.Bodies[0], err)
	}
	if want := `{"seq":"1","epoch":"` + a.Epoch + `",`; string(a.Bodies[0][:len(want)]) != want {
		t.Fatalf("the seq and epoch are not first: %s", a.Bodies[0])
	}
	p, err := l.Read(ctx, acme, 7, a.Epoch, 0, 1)
	if err != nil || len(p.Entries) != 1 || string(p.Entries[0].Body) != string(a.Bodies[0]) {
		t.Fatalf("the logged item %s differs from the appended %s (%v)", p.Entries[0].Body, a.Bodies[0], err)
	}
	other := appendN(t, l, 8, 1)
	if other.Seqs[0] != 1 || other.Epoch == a.Epoch {
		t.Fatalf("another user's log: %+v", other)
	}
	b := appendN(t, l, 7, 2)
	if b.Seqs[0] != 4 || b.Epoch != a.Epoch {
		t.Fatalf("second append: %+v", b)
	}
	for _, tc := range []struct {
		after   int64
		limit   int
		want    []int64
		hasMore bool
	}{
		{0, 10, []int64{1, 2, 3, 4, 5}, false},
		{2, 2, []int64{3, 4}, true},
		{4, 10, []int64{5}, false},
		{5, 10, []int64{}, false},
	} {
		p, err := l.Read(ctx, acme, 7, a.Epoch, tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := seqs(p); !equal(got, tc.want) || p.HasMore != tc.hasMore || p.Resync || p.LastSeq != 5 || p.Epoch != a.Epoch {
			t.Errorf("after %d limit %d: %v more=%v page %+v", tc.after, tc.limit, got, p.HasMore, p)
		}
	}
	epoch, last, err := l.Head(ctx, acme, 7)
	if err != nil || epoch != a.Epoch || last != 5 {
		t.Fatalf("head %q %d %v", epoch, last, err)
	}
	tail, err := l.Tail(ctx, acme, 7, 2)
	if err != nil || len(tail) != 2 || tail[0].Seq != 4 || tail[1].Seq != 5 || tail[1].What != "read" || tail[1].Topic != "grp1" {
		t.Fatalf("tail %+v %v", tail, err)
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLogAnswersResyncWhenItemsAreGone checks every way a reader's position can outlive the
// items: trimmed past LogSize, a log lost or expired (a new epoch), a position of another epoch,
// a position beyond the last seq; and that a position the log still serves is not resynced.
func TestLogAnswersResyncWhenItemsAreGone(t *testing.T) {
	t.Parallel()
	l, rdb, prefix := newLog(t, userchan.Config{LogSize: 5})
	ctx := testenv.Context(t)
	a := appendN(t, l, 7, 8) // seqs 1..8, 4..8 kept
	read := func(epoch string, after int64) userchan.Page {
		t.Helper()
		p, err := l.Read(ctx, acme, 7, epoch, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name   string
		epoch  string
		after  int64
		resync bool
		want   []int64
	}{
		{"trimmed after the position", a.Epoch, 2, true, nil},
		{"from the start, trimmed", "", 0, true, nil},
		{"the oldest kept is next", a.Epoch, 3, false, []int64{4, 5, 6, 7, 8}},
		{"caught up", a.Epoch, 8, false, []int64{}},
		{"beyond the last seq", a.Epoch, 9, true, nil},
		{"another epoch", "0123456789abcdef", 6, true, nil},
		{"no epoch with a position", "", 6, true, nil},
	} {
		p := read(tc.epoch, tc.after)
		if p.Resync != tc.resync || (!tc.resync && !equal(seqs(p), tc.want)) || (tc.resync && len(p.Entries) != 0) {
			t.Errorf("%s: %+v", tc.name, p)
		}
		if p.Epoch != a.Epoch || p.LastSeq != 8 {
			t.Errorf("%s: head %q %d", tc.name, p.Epoch, p.LastSeq)
		}
	}

	// The log is lost (a flush, an expiry): the next item starts a new epoch at seq 1, and a
	// reader of the old epoch is told to resync, never served seq 1 as if it followed its 8.
	if err := rdb.Del(ctx, prefix+"acme:uchan:{7}:meta", prefix+"acme:uchan:{7}:log").Err(); err != nil {
		t.Fatal(err)
	}
	if p := read(a.Epoch, 8); !p.Resync || p.Epoch != "" || p.LastSeq != 0 {
		t.Errorf("after the loss: %+v", p)
	}
	b := appendN(t, l, 7, 1)
	if b.Seqs[0] != 1 || b.Epoch == a.Epoch {
		t.Fatalf("after the loss: %+v", b)
	}
	if p := read(a.Epoch, 8); !p.Resync || p.Epoch != b.Epoch || p.LastSeq != 1 {
		t.Errorf("an old epoch's reader after the loss: %+v", p)
	}
	if p := read(b.Epoch, 0); p.Resync || !equal(seqs(p), []int64{1}) {
		t.Errorf("the new epoch from its start: %+v", p)
	}
}

// TestLogExpiresAfterItsTTL checks that a log no item was appended to for LogTTL is gone.
func TestLogExpiresAfterItsTTL(t *testing.T) {
	t.Parallel()
	l, rdb, prefix := newLog(t, userchan.Config{LogTTL: time.Minute})
	ctx := testenv.Context(t)
	appendN(t, l, 7, 1)
	for _, k := range []string{"meta", "log"} {
		ttl, err := rdb.PTTL(ctx, prefix+"acme:uchan:{7}:"+k).Result()
		if err != nil || ttl <= 50*time.Second || ttl > time.Minute {
			t.Errorf("%s ttl %v %v, want about a minute", k, ttl, err)
		}
	}
}

// TestLogIsConcurrencySafe appends from many goroutines and checks every seq is given once.
func TestLogIsConcurrencySafe(t *testing.T) {
	t.Parallel()
	l, _, _ := newLog(t, userchan.Config{})
	ctx := testenv.Context(t)
	const writers, each = 8, 25
	done := make(chan []int64, writers)
	for range writers {
		go func() {
			var got []int64
			for range each {
				out, err := l.Append(context.WithoutCancel(ctx), acme, []userchan.Batch{{User: 9, Items: []userchan.Item{{What: "read", At: time.Now()}}}})
				if err != nil {
					t.Error(err)
					break
				}
				got = append(got, out[0].Seqs...)
			}
			done <- got
		}()
	}
	seen := map[int64]bool{}
	for range writers {
		for _, s := range <-done {
			if seen[s] {
				t.Fatalf("seq %d given twice", s)
			}
			seen[s] = true
		}
	}
	for i := int64(1); i <= writers*each; i++ {
		if !seen[i] {
			t.Fatalf("seq %d never given (%s)", i, strconv.Itoa(len(seen)))
		}
	}
}
