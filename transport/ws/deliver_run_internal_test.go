package ws

import (
	"log/slog"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/imledger/imledger/domain"
)

// A run of deliveries reaches each session as its frames, whole and in the run's order, the
// skipped session's own message left out, whether the session's socket takes them at once or
// a writer goroutine finishes them.
func TestDeliverRunJoinsEachSessionsFrames(t *testing.T) {
	g := testGateway(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	connect := func(raw bool) (*session, net.Conn) {
		s, cc := loopbackSession(t, g, ln, raw)
		t.Cleanup(func() { s.kill(closeGone); _ = cc.Close() })
		return s, cc
	}
	h := NewHub()
	tenant := domain.MustTenantID("acme")
	ka, kb := hubKey{tenant, "grp1"}, hubKey{tenant, "grp2"}
	both, bothClient := connect(true)
	onlyA, onlyAClient := connect(false) // no raw socket: every frame goes through the writer
	h.topics[ka] = map[*session]domain.UserID{both: 1, onlyA: 2}
	h.topics[kb] = map[*session]domain.UserID{both: 1}

	frame := func(s string) []byte { return wireFrame([]byte(s)) }
	sh := h.delivery[0]
	h.deliverRun(sh, []delivery{
		{key: ka, wire: frame("a1")},
		{key: kb, wire: frame("b1")},
		{key: ka, skip: onlyA.id, wire: frame("a2")},
		{key: ka, wire: frame("a3")},
	})
	if len(sh.pending) != 0 || len(sh.order) != 0 {
		t.Errorf("the run left %d sessions pending, %d in order", len(sh.pending), len(sh.order))
	}
	expectFrames(t, bothClient, "a1", "b1", "a2", "a3")
	expectFrames(t, onlyAClient, "a1", "a3")
}

// testGateway is a gateway with the default configuration and no metrics registry, enough for
// sessions made by hand.
func testGateway(tb testing.TB) *Gateway {
	tb.Helper()
	cfg := Config{}
	cfg.setDefaults()
	m, err := newMetrics(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return &Gateway{cfg: cfg, metrics: m, log: slog.New(slog.DiscardHandler), sessions: map[*session]struct{}{}}
}

// loopbackSession connects a client to ln and makes a session of g on the server's end, writing
// straight to the socket when raw is set. It returns the session and the client's end.
func loopbackSession(tb testing.TB, g *Gateway, ln net.Listener, raw bool) (*session, net.Conn) {
	tb.Helper()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	s := newSession(g, sc, nil, "test")
	if raw {
		s.raw, _ = sc.(syscall.Conn).SyscallConn()
	}
	return s, cc
}

func expectFrames(t *testing.T, c net.Conn, want ...string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i, w := range want {
		//lint:ignore SA1019 the peer is this package's own server under test; its frames are small
		f, err := ws.ReadFrame(c)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !f.Header.Fin || f.Header.OpCode != ws.OpText || string(f.Payload) != w {
			t.Fatalf("frame %d: %+v %q, want text %q", i, f.Header, f.Payload, w)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	//lint:ignore SA1019 the peer is this package's own server under test; its frames are small
	if f, err := ws.ReadFrame(c); err == nil {
		t.Fatalf("an extra frame: %q", f.Payload)
	}
}
