package ws_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/session"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/presence"
)

func (n *node) presence(t *testing.T, user domain.UserID) presence.Presence {
	t.Helper()
	p, err := n.pres.Get(testCtx(t), acme, user)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPresenceAcrossNodes logs in on one node and reads presence from the other; closing the
// last session marks the user offline, a second session keeps them online.
func TestPresenceAcrossNodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.node(t, "node-a", nodeOpts{})
	b := c.node(t, "node-b", nodeOpts{})
	if p := a.presence(t, 5); p.Online {
		t.Fatalf("user 5 online before logging in: %+v", p)
	}
	s1 := dial(t, b, "s1", dialOpts{})
	s1.login(c, 5)
	s1.sub("grp3")
	if p := a.presence(t, 5); !p.Online || p.Node != "node-b" || p.Sessions != 1 {
		t.Fatalf("from node a after login on b: %+v", p)
	}
	if nodes, _ := a.pres.NodesForTopic(testCtx(t), acme, mustTopic(t, "grp3")); !slices.Equal(nodes, []string{"node-b"}) {
		t.Errorf("nodes for grp3 = %v, want [node-b]", nodes)
	}
	s2 := dial(t, a, "s2", dialOpts{})
	s2.login(c, 5)
	if p := b.presence(t, 5); !p.Online || p.Sessions != 2 {
		t.Fatalf("with sessions on both nodes: %+v", p)
	}

	_ = s1.c.CloseNow()
	waitUntil(t, "one session left", func() bool { p := a.presence(t, 5); return p.Online && p.Sessions == 1 })
	if nodes, _ := a.pres.NodesForTopic(testCtx(t), acme, mustTopic(t, "grp3")); len(nodes) != 0 {
		t.Errorf("nodes for grp3 after its only member left = %v", nodes)
	}
	closed := time.Now()
	_ = s2.c.CloseNow()
	waitUntil(t, "offline", func() bool { return !a.presence(t, 5).Online })
	p := b.presence(t, 5)
	if p.Status != presence.StatusOffline || p.LastSeen.Before(closed.Add(-time.Second)) {
		t.Errorf("after the last session closed: %+v", p)
	}
}

// TestSecondDeviceKeepsTheUserOnInTheTopic: a user subscribed to a group from two devices (on
// two nodes, then on one node) who closes or leaves on one of them is still in the group: the
// other members get no "off" pres until the last of the user's sessions goes.
func TestSecondDeviceKeepsTheUserOnInTheTopic(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.node(t, "node-a", nodeOpts{})
	b := c.node(t, "node-b", nodeOpts{})
	watcher := dial(t, a, "watcher", dialOpts{})
	watcher.login(c, 1)
	watcher.sub("grp6")
	offs := func() int {
		n := 0
		for _, f := range watcher.snapshot() {
			if f.Pres != nil && f.Pres.Src == "5" && f.Pres.What == "off" && f.Pres.Topic == "grp6" {
				n++
			}
		}
		return n
	}
	quiet := func(what string, want int) {
		t.Helper()
		time.Sleep(300 * time.Millisecond) // room for a pres frame through fanout
		if got := offs(); got != want {
			t.Fatalf("%s: %d off pres frames of user 5, want %d", what, got, want)
		}
	}

	laptop := dial(t, b, "laptop", dialOpts{})
	laptop.login(c, 5)
	laptop.sub("grp6")
	phone := dial(t, a, "phone", dialOpts{})
	phone.login(c, 5)
	phone.sub("grp6")
	_ = laptop.c.CloseNow()
	waitUntil(t, "the laptop's logout", func() bool { return a.presence(t, 5).Sessions == 1 })
	quiet("the laptop on another node closed, the phone still in the group", 0)

	tablet := dial(t, a, "tablet", dialOpts{})
	tablet.login(c, 5)
	tablet.sub("grp6")
	if r := tablet.call("l", `{"leave":{"id":"l","topic":"grp6"}}`); r.Code != 200 {
		t.Fatalf("leave = %+v", r)
	}
	quiet("the tablet on the same node left, the phone still in the group", 0)
	_ = tablet.c.CloseNow()
	waitUntil(t, "the tablet's logout", func() bool { return a.presence(t, 5).Sessions == 1 })
	quiet("the tablet closed", 0)

	_ = phone.c.CloseNow()
	watcher.waitFor("off once the last device closed", func([]serverFrame) bool { return offs() == 1 })
	quiet("after the last device closed", 1)
}

// TestCrashedNodeUsersGoOfflineWithinTTL stops a node without any cleanup: its Redis connection
// dies first, so its sessions' logouts never arrive. Its users must go offline, and leave the
// topic's node list, within the presence TTL.
func TestCrashedNodeUsersGoOfflineWithinTTL(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	const ttl = time.Second
	a := c.node(t, "node-a", nodeOpts{presenceTTL: ttl})
	crashRedis := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr, MaxRetries: -1})
	crashed := c.node(t, "node-c", nodeOpts{presenceTTL: ttl, rdb: crashRedis})

	watcher := dial(t, a, "watcher", dialOpts{})
	watcher.login(c, 1)
	watcher.sub("grp4")
	victim := dial(t, crashed, "victim", dialOpts{})
	victim.login(c, 2)
	victim.sub("grp4")
	if p := a.presence(t, 2); !p.Online || p.Node != "node-c" {
		t.Fatalf("victim before the crash: %+v", p)
	}
	// The watcher on node a sees the victim's pres "on" through fanout.
	watcher.waitFor("pres on", func(fs []serverFrame) bool {
		for _, f := range fs {
			if f.Pres != nil && f.Pres.Src == "2" && f.Pres.What == "on" && f.Pres.Topic == "grp4" {
				return true
			}
		}
		return false
	})

	_ = crashRedis.Close()
	crashedAt := time.Now()
	_ = victim.c.CloseNow()
	waitUntil(t, "the crashed node's user offline", func() bool { return !a.presence(t, 2).Online })
	if took := time.Since(crashedAt); took > ttl+500*time.Millisecond {
		t.Errorf("offline after %s, want within the %s TTL", took, ttl)
	}
	waitUntil(t, "node-c gone from grp4", func() bool {
		nodes, _ := a.pres.NodesForTopic(testCtx(t), acme, mustTopic(t, "grp4"))
		return slices.Equal(nodes, []string{"node-a"})
	})
	if p := a.presence(t, 1); !p.Online {
		t.Errorf("the live node's user went offline: %+v", p)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustTopic(t *testing.T, s string) domain.Topic {
	t.Helper()
	topic, err := domain.ParseTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	return topic
}

// TestSessionsAreRecordedAsEvents checks that a logged-in session's opening and close are
// appended to the event store, so presence can be replayed from the log.
func TestSessionsAreRecordedAsEvents(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	rec, err := session.NewRecorder(c.store, session.RecorderConfig{Node: "node-a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go rec.Run(ctx)
	a := c.node(t, "node-a", nodeOpts{sessions: rec})
	s := dial(t, a, "s1", dialOpts{})
	s.login(c, 9)
	anon := dial(t, a, "s2", dialOpts{}) // never logs in: no session events
	_ = s.c.CloseNow()
	_ = anon.c.CloseNow()
	count := func(typ domain.EventType) int64 {
		n, err := c.store.Count(testCtx(t), eventstore.Filter{Tenant: acme, EventTypes: []domain.EventType{typ}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitUntil(t, "session closed event", func() bool { return count(domain.EventSessionClosed) == 1 })
	if n := count(domain.EventSessionOpened); n != 1 {
		t.Fatalf("%d session.opened events, want 1", n)
	}
	evs, err := c.store.ReadAll(testCtx(t), eventstore.Filter{Tenant: acme, EventTypes: []domain.EventType{domain.EventSessionClosed}}, 0, 10)
	if err != nil || len(evs) != 1 {
		t.Fatalf("read closed event: %v", err)
	}
	var p domain.SessionClosed
	if err := evs[0].Decode(&p); err != nil || p.User != 9 || p.Node != "node-a" || p.Reason == "" {
		t.Fatalf("closed payload %+v (%v)", p, err)
	}
}

// TestHiUserAgentIsStoredClean: the user agent of hi is free text the session's events keep. A
// NUL in it (which PostgreSQL's jsonb refuses) must not cost any session its events, control
// characters and invalid characters are dropped, and the 256-byte cut never splits a character.
func TestHiUserAgentIsStoredClean(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	rec, err := session.NewRecorder(c.store, session.RecorderConfig{Node: "node-a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go rec.Run(ctx)
	a := c.node(t, "node-a", nodeOpts{sessions: rec})
	cases := []struct{ ua, want string }{ // ua as JSON text
		{`"evil\u0000ua"`, "evilua"},
		{`"tab\tnew\nline\u001b[31m\u0085end"`, "tabnewline[31mend"},
		{`"lone \ud800 surrogate"`, "lone  surrogate"},
		{`"x` + strings.Repeat("é", 200) + `"`, "x" + strings.Repeat("é", 127)},
		{`"` + strings.Repeat("a", 300) + `"`, strings.Repeat("a", 256)},
		{`"demo/1.0"`, "demo/1.0"},
	}
	for i, tc := range cases {
		cl := dial(t, a, fmt.Sprintf("ua%d", i), dialOpts{})
		if r := cl.call("hi", `{"hi":{"id":"hi","ua":`+tc.ua+`}}`); r.Code != 201 {
			t.Fatalf("hi %q = %+v", tc.ua, r)
		}
		cl.login(c, userID(100+i))
	}
	var evs []domain.Envelope
	waitUntil(t, "every session.opened event", func() bool {
		evs, err = c.store.ReadAll(testCtx(t), eventstore.Filter{Tenant: acme, EventTypes: []domain.EventType{domain.EventSessionOpened}}, 0, 100)
		return err == nil && len(evs) == len(cases)
	})
	for _, e := range evs {
		var p domain.SessionOpened
		if err := e.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if want := cases[int(p.User)-100].want; p.UserAgent != want {
			t.Errorf("user %d: user agent stored as %q, want %q", p.User, p.UserAgent, want)
		}
	}
}
