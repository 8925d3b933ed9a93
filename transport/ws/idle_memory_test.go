package ws_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"runtime"
	"testing"
	"time"

	gws "github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
)

// rawCall writes one client frame and reads server frames until the ctrl answering id.
func rawCall(t *testing.T, conn net.Conn, id string, frame any) ctrlFrame {
	t.Helper()
	b, err := json.Marshal(frame)
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = conn.SetDeadline(time.Time{}) }()
	if err := wsutil.WriteClientText(conn, b); err != nil {
		t.Fatalf("%s: write: %v", id, err)
	}
	for {
		msg, err := wsutil.ReadServerText(conn)
		if err != nil {
			t.Fatalf("%s: read: %v", id, err)
		}
		var f serverFrame
		if err := json.Unmarshal(msg, &f); err != nil {
			t.Fatalf("%s: %s: %v", id, msg, err)
		}
		if f.Ctrl != nil && f.Ctrl.ID == id {
			return *f.Ctrl
		}
	}
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// An idle, logged-in connection subscribed to a topic holds its session, its presence and its
// subscription, and little else: no goroutine, read or write buffer, queue, timer or net/http
// context, and its small collections are not Go maps (a map takes a few hundred bytes from its
// first entry). Measured as the live heap the process gains per connection, with the client's
// ends (a net.TCPConn each) in the same process, so the bound covers both: 3.8-3.9 KB with a Go
// map per subscription set and the request's contexts kept, 1.9-2.0 KB without.
//
// Not parallel: it reads the process's heap, which other tests would change.
func TestAnIdleConnectionCostsLittleHeap(t *testing.T) {
	c := newCluster(t)
	n := c.node(t, "node-mem", nodeOpts{})
	const warm, conns = 100, 400 // two batches of conns each, measured apart
	users := make([]domain.UserID, warm+2*conns)
	for i := range users {
		users[i] = userID(5000 + i)
	}
	storetest.RegisterUsers(t, c.store, acme, users...)
	tokens := make([]string, len(users))
	for i, u := range users {
		tokens[i] = c.token(t, u)
	}
	ctx := testCtx(t)
	held := make([]net.Conn, 0, len(users))
	t.Cleanup(func() {
		for _, conn := range held {
			_ = conn.Close()
		}
	})
	open := func(i int) {
		conn, br, _, err := gws.Dial(ctx, n.url())
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		if br != nil {
			gws.PutReader(br)
		}
		held = append(held, conn)
		if r := rawCall(t, conn, "login", map[string]any{"login": map[string]any{"id": "login", "token": tokens[i]}}); r.Code != 200 {
			t.Fatalf("login %d = %+v", i, r)
		}
		topic := fmt.Sprintf("grp%d", 900+i%40)
		if r := rawCall(t, conn, "sub", map[string]any{"sub": map[string]any{"id": "sub", "topic": topic}}); r.Code != 200 {
			t.Fatalf("sub %d = %+v", i, r)
		}
	}
	// The first connections set up what later ones share: the Redis pool's connections, the
	// topics' hub entries, the gateway's pools.
	for i := range warm {
		open(i)
	}
	waitIdle := func() {
		deadline := time.Now().Add(10 * time.Second)
		for sessionGoroutines() != 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitIdle()
	// The process's heap also grows in steps that are not the connections' (a table of the node
	// or a pool doubling, 256 KiB at a time, in some runs and not in others): two batches are
	// measured apart and the smaller growth counts, as a step lands in one of them only while
	// what each connection holds shows in both.
	per := int64(math.MaxInt64)
	for b := range 2 {
		before := liveHeap()
		for i := warm + b*conns; i < warm+(b+1)*conns; i++ {
			open(i)
		}
		waitIdle()
		after := liveHeap()
		if s := n.gw.Sessions(); s != warm+(b+1)*conns {
			t.Fatalf("%d sessions, want %d", s, warm+(b+1)*conns)
		}
		per = min(per, (int64(after)-int64(before))/conns)
	}
	t.Logf("%d idle connections: %d bytes of live heap each, both ends", conns, per)
	if per > 2800 {
		t.Fatalf("an idle connection holds %d bytes of live heap (both ends), want at most 2800", per)
	}
}
