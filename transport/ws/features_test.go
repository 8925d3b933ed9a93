package ws_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/ws"
)

func TestHiLoginAndAckEchoFrameIDs(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := c.node(t, "node-a", nodeOpts{})
	cl := dial(t, n, "u1", dialOpts{})
	hi := cl.call("h1", `{"hi":{"id":"h1","ver":"1","ua":"test/1.0"}}`)
	if hi.Code != 201 || hi.Params["ver"] != ws.ProtocolVersion || hi.Params["sid"] == "" {
		t.Fatalf("hi = %+v", hi)
	}
	login := cl.call("l1", map[string]any{"login": map[string]any{"id": "l1", "token": c.token(t, 7)}})
	if login.Code != 200 || login.Params["user"] != "7" || login.Params["tenant"] != "acme" {
		t.Fatalf("login = %+v", login)
	}
	// Logging in again with a fresh token of the same user is allowed.
	if r := cl.call("l2", map[string]any{"login": map[string]any{"id": "l2", "token": c.token(t, 7)}}); r.Code != 200 {
		t.Fatalf("second login = %+v", r)
	}
	cl.sub("p2p7_8")
	ack := cl.call("x-42", `{"pub":{"id":"x-42","topic":"p2p7_8","client_msg_id":"cm-1","content":{"text":"hi"},"head":{"mentions":["8"]}}}`)
	if ack.Code != 202 || ack.Params["seq"] != "1" || ack.Params["topic"] != "p2p7_8" || ack.Params["message_id"] == "" || ack.Params["duplicate"] != nil {
		t.Fatalf("ack = %+v", ack)
	}
	again := cl.call("x-43", `{"pub":{"id":"x-43","topic":"p2p7_8","client_msg_id":"cm-1","content":{"text":"hi"}}}`)
	if again.Code != 202 || again.Params["seq"] != "1" || again.Params["message_id"] != ack.Params["message_id"] || again.Params["duplicate"] != true {
		t.Fatalf("resend ack = %+v, want the first ack as a duplicate", again)
	}
	d := cl.waitFor("the echo", func(fs []serverFrame) bool { return countData(fs) == 1 })
	time.Sleep(50 * time.Millisecond)
	if got := cl.data(); len(got) != 1 || got[0].Seq != "1" || got[0].From != "7" || string(got[0].Content) != `{"text":"hi"}` ||
		string(got[0].Head) != `{"mentions":["8"]}` {
		t.Fatalf("data frames = %+v (of %d frames), want one echo of seq 1 with its head; the resend must not be delivered", got, len(d))
	}
	if r := cl.call("pg", `{"ping":{"id":"pg"}}`); r.Code != 200 || r.Text != "pong" {
		t.Errorf("ping = %+v", r)
	}
	if n := c.events(t); n != 1 {
		t.Errorf("%d events stored, want 1", n)
	}
}

func TestGetHistoryAfterSeq(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := c.node(t, "node-a", nodeOpts{})
	cl := dial(t, n, "u1", dialOpts{})
	cl.login(c, 1)
	for k := 1; k <= 5; k++ {
		if r := cl.call(fmt.Sprint(k), fmt.Sprintf(`{"pub":{"id":"%d","topic":"grp2","client_msg_id":"m%d","content":"msg %d"}}`, k, k, k)); r.Code != 202 {
			t.Fatalf("pub %d = %+v", k, r)
		}
	}
	// Not subscribed, so every data frame below answers the get.
	r := cl.call("g", `{"get":{"id":"g","topic":"grp2","after_seq":"2","limit":2}}`)
	if r.Code != 200 || r.Params["count"] != float64(2) || r.Params["last_seq"] != "5" || r.Params["has_more"] != true {
		t.Fatalf("get = %+v", r)
	}
	got := cl.data()
	if len(got) != 2 || got[0].Seq != "3" || got[1].Seq != "4" || string(got[1].Content) != `"msg 4"` || got[0].From != "1" {
		t.Fatalf("history frames = %+v", got)
	}
	if r := cl.call("g2", `{"get":{"id":"g2","topic":"grp2","after_seq":4}}`); r.Params["count"] != float64(1) || r.Params["has_more"] != false {
		t.Errorf("last page = %+v", r)
	}
	// A seq is a JSON string: its escapes are decoded ("\u0034" is "4").
	if r := cl.call("g4", `{"get":{"id":"g4","topic":"grp2","after_seq":"\u0034"}}`); r.Code != 200 || r.Params["count"] != float64(1) {
		t.Errorf("get after_seq \"\\u0034\" = %+v", r)
	}
	if r := cl.call("g5", `{"get":{"id":"g5","topic":"grp2","after_seq":"0","before_seq":null}}`); r.Code != 200 || r.Params["count"] != float64(5) {
		t.Errorf("get after_seq \"0\" = %+v", r)
	}
	if r := cl.call("g3", `{"get":{"id":"g3","topic":"p2p8_9"}}`); r.Code != 403 || r.Reason != ws.ReasonNotMember {
		t.Errorf("get of another pair's 1:1 topic = %+v", r)
	}
}

func TestNotes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.node(t, "node-a", nodeOpts{})
	b := c.node(t, "node-b", nodeOpts{})
	u1 := dial(t, a, "u1", dialOpts{})
	u1.login(c, 1)
	u1.sub("p2p1_2")
	u2 := dial(t, b, "u2", dialOpts{})
	u2.login(c, 2)
	u2.sub("p2p1_2")
	if r := u1.call("p", `{"pub":{"id":"p","topic":"p2p1_2","client_msg_id":"c1","content":"hello"}}`); r.Code != 202 {
		t.Fatalf("pub = %+v", r)
	}
	u2.waitFor("the message", func(fs []serverFrame) bool { return countData(fs) == 1 })
	before := c.events(t)

	u2.write(`{"note":{"topic":"p2p1_2","what":"kp"}}`)
	u1.waitFor("typing", func(fs []serverFrame) bool { return hasInfo(fs, "kp", "2", "") })
	u2.write(`{"note":{"topic":"p2p1_2","what":"read","seq":"1"}}`)
	u1.waitFor("the read receipt", func(fs []serverFrame) bool { return hasInfo(fs, "read", "2", "1") })
	if hasInfo(u2.snapshot(), "kp", "2", "") {
		t.Error("the typist got its own kp")
	}
	after := c.events(t)
	if after != before+1 {
		t.Errorf("events %d -> %d: want exactly one (the read mark), none for kp", before, after)
	}
	marks, err := c.store.ReadStream(testCtx(t), acme, domain.ReadMarksStreamID(mustTopic(t, "p2p1_2"), 2), 0, 10)
	if err != nil || len(marks) != 1 {
		t.Fatalf("read marks of user 2 = %d events, %v", len(marks), err)
	}
	// A repeated read note changes nothing: no event, no receipt.
	u2.write(`{"note":{"topic":"p2p1_2","what":"read","seq":"1"}}`)
	if r := u2.call("pg", `{"ping":{"id":"pg"}}`); r.Code != 200 {
		t.Fatal(r)
	}
	if n := c.events(t); n != after {
		t.Errorf("a repeated read note appended %d events", n-after)
	}
}

func hasInfo(fs []serverFrame, what, from, seq string) bool {
	for _, f := range fs {
		if f.Info != nil && f.Info.What == what && f.Info.From == from && f.Info.Seq == seq {
			return true
		}
	}
	return false
}

func TestOriginCheck(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	same := c.node(t, "node-a", nodeOpts{})
	listed := c.node(t, "node-b", nodeOpts{cfg: ws.Config{AllowedOrigins: []string{"https://app.example.com", "https://*.chat.example.org"}}})
	host := strings.TrimPrefix(same.srv.URL, "http://")
	tests := []struct {
		name   string
		n      *node
		origin string
		ok     bool
	}{
		{name: "no origin (not a browser)", n: same, origin: "", ok: true},
		{name: "same host", n: same, origin: "http://" + host, ok: true},
		{name: "other host", n: same, origin: "https://evil.example.com", ok: false},
		{name: "listed origin", n: listed, origin: "https://app.example.com", ok: true},
		{name: "listed wildcard", n: listed, origin: "https://eu.chat.example.org", ok: true},
		{name: "wildcard needs a subdomain", n: listed, origin: "https://chat.example.org", ok: false},
		{name: "scheme must match", n: listed, origin: "http://app.example.com", ok: false},
		{name: "unlisted", n: listed, origin: "https://example.com", ok: false},
		{name: "garbage", n: listed, origin: "::", ok: false},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
		h := http.Header{}
		if tt.origin != "" {
			h.Set("Origin", tt.origin)
		}
		conn, resp, err := websocket.Dial(ctx, tt.n.url(), &websocket.DialOptions{HTTPHeader: h})
		cancel()
		if tt.ok != (err == nil) {
			t.Errorf("%s: dial err = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err == nil {
			_ = conn.CloseNow()
		} else if resp != nil && resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: refused with %d, want 403", tt.name, resp.StatusCode)
		}
	}
}

func TestIdleAndLoginTimeouts(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := c.node(t, "node-a", nodeOpts{cfg: ws.Config{IdleTimeout: 400 * time.Millisecond, LoginTimeout: 300 * time.Millisecond}})
	// The idle and busy clients log in on a node of their own with a login timeout they cannot
	// miss on a loaded machine (a race run took more than 300 ms from dial to login).
	m := c.node(t, "node-b", nodeOpts{cfg: ws.Config{IdleTimeout: 400 * time.Millisecond, LoginTimeout: 10 * time.Second}})

	anon := dial(t, n, "anon", dialOpts{})
	start := time.Now()
	if code, reason := anon.closed(3 * time.Second); code != websocket.StatusPolicyViolation || reason != "login timeout" {
		t.Errorf("never logged in: closed %d %q", code, reason)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Errorf("closed after %s, before the login timeout", took)
	}

	idle := dial(t, m, "idle", dialOpts{})
	idle.login(c, 1)
	if code, reason := idle.closed(3 * time.Second); code != websocket.StatusPolicyViolation || reason != "idle timeout" {
		t.Errorf("idle: closed %d %q", code, reason)
	}

	// WebSocket pings keep a connection alive past the idle timeout.
	busy := dial(t, m, "busy", dialOpts{})
	busy.login(c, 2)
	for range 8 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := busy.c.Ping(ctx); err != nil {
			t.Fatalf("ping: %v", err)
		}
		cancel()
		time.Sleep(150 * time.Millisecond)
	}
	if r := busy.call("pg", `{"ping":{"id":"pg"}}`); r.Code != 200 {
		t.Errorf("after 1.2 s of pings: %+v", r)
	}
	if v := m.counter(t, "imledger_ws_disconnects_total", map[string]string{"cause": "idle"}); v != 1 {
		t.Errorf("disconnects{idle} = %v, want 1", v)
	}
}

func TestShutdownClosesSessionsAndLogsOut(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := c.node(t, "node-a", nodeOpts{})
	watch := c.node(t, "node-b", nodeOpts{})
	cl := dial(t, n, "u1", dialOpts{})
	cl.login(c, 1)
	cl.sub("grp1")
	if !watch.presence(t, 1).Online {
		t.Fatal("not online after login")
	}
	ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel()
	if err := n.gw.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if code, _ := cl.closed(time.Second); code != websocket.StatusGoingAway {
		t.Errorf("close status = %d, want 1001", code)
	}
	if p := watch.presence(t, 1); p.Online {
		t.Errorf("still online after the node shut down: %+v", p)
	}
	if n.gw.Sessions() != 0 {
		t.Errorf("%d sessions left", n.gw.Sessions())
	}
	ctx2, cancel2 := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel2()
	if _, resp, err := websocket.Dial(ctx2, n.url(), nil); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("dial after Shutdown: %v", err)
	}
}

// TestFragmentedMessage sends a pub split over several WebSocket frames, with a ping between
// fragments; it is one message to the gateway.
func TestFragmentedMessage(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := c.node(t, "node-a", nodeOpts{})
	cl := dial(t, n, "frag", dialOpts{})
	cl.login(c, 1)
	frame := `{"pub":{"id":"f","topic":"grp5","client_msg_id":"frag-1","content":"` + strings.Repeat("ab", 3000) + `"}}`
	ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel()
	w, err := cl.c.Writer(ctx, websocket.MessageText)
	if err != nil {
		t.Fatal(err)
	}
	for i, part := range []string{frame[:100], frame[100:4000], frame[4000:]} {
		if _, err := w.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := cl.c.Ping(ctx); err != nil { // answered in the middle of the message
				t.Fatalf("ping between fragments: %v", err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if r := cl.ctrl("f"); r.Code != 202 || r.Params["seq"] != "1" {
		t.Fatalf("fragmented pub = %+v", r)
	}
}
