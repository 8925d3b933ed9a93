package ws_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/access"
	"github.com/imledger/imledger/transport/userchan"
)

// follower is a client of the channel as the protocol says to write one: it keeps the epoch
// and the last seq it processed, ignores an item at or below it, and asks get after it when an
// item skips a seq, when it reconnects, and page after page while has_more.
type follower struct {
	t     *testing.T
	epoch string
	last  int64
	got   []int64 // the seqs processed, in order
	seen  int     // frames of the current connection looked at
	cl    *client
}

// attach makes f follow its user's channel on cl: sub, then get after its position.
func (f *follower) attach(cl *client) {
	f.t.Helper()
	f.cl, f.seen = cl, 0
	p := cl.subMe()
	if f.epoch == "" && f.last == 0 {
		f.epoch = p["epoch"].(string)
	}
	f.catchUp()
}

// catchUp gets pages after f's position until has_more is false, processing them.
func (f *follower) catchUp() {
	f.t.Helper()
	for {
		id := fmt.Sprintf("get-%d", time.Now().UnixNano())
		r := f.cl.call(id, map[string]any{"get": map[string]any{"id": id, "topic": "me", "epoch": f.epoch, "after_seq": strconv.FormatInt(f.last, 10), "limit": 7}})
		switch r.Code {
		case 205:
			f.t.Fatalf("resync while the log holds every item: %+v", r)
		case 200:
		default:
			f.t.Fatalf("get me = %+v", r)
		}
		if e := r.Params["epoch"].(string); e != "" {
			f.epoch = e
		}
		f.process()
		if r.Params["has_more"] != true {
			return
		}
	}
}

// process handles the items received so far on the current connection.
func (f *follower) process() {
	f.t.Helper()
	frames := f.cl.snapshot()
	for ; f.seen < len(frames); f.seen++ {
		m := frames[f.seen].Me
		if m == nil || m.Seq == "" {
			continue
		}
		if f.epoch == "" {
			f.epoch = m.Epoch // the log was created after the client's sub
		} else if m.Epoch != f.epoch {
			f.t.Fatalf("item %s of another epoch than %s", m.Raw, f.epoch)
		}
		seq, _ := strconv.ParseInt(m.Seq, 10, 64)
		switch {
		case seq <= f.last:
			continue // already processed (a live item the get also returned)
		case seq > f.last+1:
			f.seen++
			f.catchUp() // a gap: ask for what is missing
			return
		}
		f.last = seq
		f.got = append(f.got, seq)
	}
}

// TestChannelCatchUpAfterReconnectHasNoGapNoDuplicate posts items to a user without pause while
// the user's client follows the channel on one node, drops the connection, and reconnects to the
// other node: the client ends with every item exactly once, in seq order.
func TestChannelCatchUpAfterReconnectHasNoGapNoDuplicate(t *testing.T) {
	t.Parallel()
	c, a, b := channelNodes(t, userchan.Config{})
	const bob domain.UserID = 2
	const total = 120
	first := dial(t, b.node, "bob@b", dialOpts{})
	first.login(c, bob)
	f := &follower{t: t}
	f.attach(first)

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range total {
			n := a.channel
			if i%2 == 1 {
				n = b.channel
			}
			n.Post(testCtx(t), acme, userchan.Item{What: userchan.WhatFriendRequested, From: domain.UserID(100 + i), Src: bob, At: time.Now()}, bob)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	first.waitFor("some items", func([]serverFrame) bool { return len(first.items()) >= 20 })
	f.process()
	_ = first.c.CloseNow()
	time.Sleep(50 * time.Millisecond) // items go on while bob is away
	second := dial(t, a.node, "bob@a", dialOpts{})
	second.login(c, bob)
	f.attach(second)
	wg.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for f.last < total && time.Now().Before(deadline) {
		f.process()
		time.Sleep(5 * time.Millisecond)
	}
	if len(f.got) != total {
		t.Fatalf("processed %d items, want %d: %v", len(f.got), total, f.got)
	}
	for i, s := range f.got {
		if s != int64(i+1) {
			t.Fatalf("item %d has seq %d: %v", i, s, f.got)
		}
	}
}

// TestChannelResyncBeyondTheLog trims the log below a disconnected client's position: its get is
// answered 205 resync with the log's epoch and last seq, once, and from there the client follows
// again: a later item arrives live with the next seq and a get after it is answered 200. A get of
// another epoch is resynced too.
func TestChannelResyncBeyondTheLog(t *testing.T) {
	t.Parallel()
	c, a, b := channelNodes(t, userchan.Config{LogSize: 5})
	const bob domain.UserID = 2
	cl := dial(t, b.node, "bob@b", dialOpts{})
	cl.login(c, bob)
	p := cl.subMe()
	item := userchan.Item{What: userchan.WhatInvited, Src: bob, From: 1, At: time.Now()}
	a.channel.Post(testCtx(t), acme, item, bob)
	it := cl.waitItem("invited", "", "")
	if it.Seq != "1" {
		t.Fatalf("first item %s", it.Raw)
	}
	_ = cl.c.CloseNow()
	for range 8 {
		a.channel.Post(testCtx(t), acme, item, bob)
	}
	again := dial(t, a.node, "bob@a", dialOpts{})
	again.login(c, bob)
	sub := again.subMe()
	epoch := sub["epoch"].(string)
	if sub["last_seq"] != "9" || epoch == "" || p["epoch"] == epoch && p["epoch"] != "" {
		t.Fatalf("sub after the items: %v (first sub %v)", sub, p)
	}
	get := func(id, ep string, after int) ctrlFrame {
		return again.call(id, map[string]any{"get": map[string]any{"id": id, "topic": "me", "epoch": ep, "after_seq": strconv.Itoa(after)}})
	}
	r := get("g1", epoch, 1)
	if r.Code != 205 || r.Params["resync"] != true || r.Params["last_seq"] != "9" || r.Params["epoch"] != epoch {
		t.Fatalf("get after 1 with 4 items trimmed = %+v", r)
	}
	if n := len(again.items()); n != 0 {
		t.Fatalf("a resync came with %d items", n)
	}
	if r := get("g2", "0123456789abcdef", 9); r.Code != 205 {
		t.Errorf("get of another epoch = %+v", r)
	}
	if r := get("g3", epoch, 4); r.Code != 200 || r.Params["count"] != float64(5) {
		t.Errorf("get after the oldest kept = %+v", r)
	}
	a.channel.Post(testCtx(t), acme, item, bob)
	if it := again.waitItem("invited", "", ""); it.Seq != "5" && it.Seq != "10" {
		t.Fatalf("item %s", it.Raw)
	}
	again.waitFor("the live item after the resync", func([]serverFrame) bool {
		for _, m := range again.items() {
			if m.Seq == "10" {
				return true
			}
		}
		return false
	})
	if r := get("g4", epoch, 10); r.Code != 200 || r.Params["count"] != float64(0) || r.Params["last_seq"] != "10" {
		t.Errorf("get after the live item = %+v", r)
	}
}

// TestRevokedSessionGetsItsAccountItem revokes a user's tokens on node a while the user has a
// channel session on node b: the session gets the change as a channel item (what account, change
// tokens_revoked, reason token_revoked) before the ctrl that ends it and the close 1008; a
// session opened with a newer token stays and gets the item too. A ban logs its own item.
func TestRevokedSessionGetsItsAccountItem(t *testing.T) {
	t.Parallel()
	c, a, b := channelNodes(t, userchan.Config{})
	const bob domain.UserID = 2
	old := dial(t, b.node, "bob-old@b", dialOpts{})
	old.login(c, bob)
	old.subMe()
	notifier := access.NewNotifier(a.fan, nil).WithChannel(a.channel)
	revokedAt := time.Now().Add(time.Second).Truncate(time.Second)
	notifier.AccountChanged(testCtx(t), account.Status{Tenant: acme, User: bob, NotBefore: revokedAt, Version: 2}, account.ChangeTokensRevoked)

	code, reason := old.closed(10 * time.Second)
	if code != 1008 || reason != "token_revoked" {
		t.Fatalf("close %d %q", code, reason)
	}
	frames := old.snapshot()
	itemAt, endAt := -1, -1
	for i, f := range frames {
		if f.Me != nil && f.Me.What == "account" {
			itemAt = i
			if f.Me.Change != "tokens_revoked" || f.Me.Reason != "token_revoked" || f.Me.Seq != "1" {
				t.Errorf("account item %s", f.Me.Raw)
			}
		}
		if f.Ctrl != nil && f.Ctrl.Reason == "token_revoked" {
			endAt = i
		}
	}
	if itemAt < 0 || endAt < 0 || itemAt > endAt {
		t.Fatalf("account item at %d, session end at %d: the item must come first", itemAt, endAt)
	}

	// A ban: logged with its own seq, read by a later catch-up.
	notifier.AccountChanged(testCtx(t), account.Status{Tenant: acme, User: bob, Banned: true, Version: 3}, account.ChangeBanned)
	later := dial(t, a.node, "bob-later@a", dialOpts{})
	later.login(c, bob)
	r := later.call("g", map[string]any{"get": map[string]any{"id": "g", "topic": "me"}})
	its := later.items()
	if r.Code != 200 || len(its) != 2 || its[1].What != "account" || its[1].Change != "banned" || its[1].Reason != "user_banned" {
		t.Fatalf("catch-up after the ban: %+v %+v", r, its)
	}
}
