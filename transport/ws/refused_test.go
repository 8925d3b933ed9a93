package ws_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/ws"
)

// TestRefusedFrames sends frames the gateway must refuse and checks the answer's code, reason
// and echoed id, and that nothing was written for any of them.
func TestRefusedFrames(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := c.node(t, "node-a", nodeOpts{})
	expired, err := newExpiredToken(c)
	if err != nil {
		t.Fatal(err)
	}
	// Expired 10 s ago: within the verifier's 30 s clock-skew leeway, still refused.
	lately, err := authSignerAt(time.Now().Add(-70 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	expiredLately, err := lately.Issue(acme, 1, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		login  domain.UserID // 0: not logged in
		frame  string
		id     string
		code   int
		reason string
		params map[string]any // expected subset
	}{
		{name: "invalid JSON", frame: `{"pub":{"id":"1"`, code: 400, reason: ws.ReasonBadFrame},
		{name: "not an object", frame: `[1,2]`, code: 400, reason: ws.ReasonBadFrame},
		{name: "two frame types", frame: `{"sub":{"id":"2"},"leave":{"id":"3"}}`, code: 400, reason: ws.ReasonBadFrame},
		{name: "empty object", frame: `{}`, code: 400, reason: ws.ReasonBadFrame},
		{name: "unknown type", frame: `{"acc":{"id":"4","user":"new"}}`, id: "4", code: 400, reason: ws.ReasonUnknownFrame},
		{name: "field of the wrong type", login: 1, frame: `{"pub":{"id":"5","topic":7}}`, id: "5", code: 400, reason: ws.ReasonBadFrame},
		{name: "pub before login", frame: `{"pub":{"id":"6","topic":"grp1","client_msg_id":"c1","content":"hi"}}`, id: "6", code: 401, reason: ws.ReasonNotAuthenticated},
		{name: "sub before login", frame: `{"sub":{"id":"7","topic":"grp1"}}`, id: "7", code: 401, reason: ws.ReasonNotAuthenticated},
		{name: "pub to another pair's 1:1 topic", login: 1, frame: `{"pub":{"id":"8","topic":"p2p5_6","client_msg_id":"c1","content":"hi"}}`, id: "8", code: 403, reason: ws.ReasonNotMember},
		{name: "sub to another pair's 1:1 topic", login: 1, frame: `{"sub":{"id":"9","topic":"p2p5_6"}}`, id: "9", code: 403, reason: ws.ReasonNotMember},
		{name: "pub without client_msg_id", login: 1, frame: `{"pub":{"id":"10","topic":"grp1","content":"hi"}}`, id: "10", code: 400, reason: ws.ReasonInvalid,
			params: map[string]any{"field": "client_msg_id", "reason": "required"}},
		{name: "pub without content", login: 1, frame: `{"pub":{"id":"11","topic":"grp1","client_msg_id":"c1"}}`, id: "11", code: 400, reason: ws.ReasonInvalid,
			params: map[string]any{"field": "content", "reason": "required"}},
		{name: "pub with a bad topic", login: 1, frame: `{"pub":{"id":"12","topic":"chn1","client_msg_id":"c1","content":"hi"}}`, id: "12", code: 400, reason: ws.ReasonInvalid,
			params: map[string]any{"field": "topic", "reason": "unknown_kind"}},
		{name: "pub with an unknown msg_type", login: 1, frame: `{"pub":{"id":"13","topic":"grp1","client_msg_id":"c1","content":"hi","msg_type":"poll"}}`, id: "13", code: 400, reason: ws.ReasonInvalid,
			params: map[string]any{"field": "msg_type"}},
		{name: "login with a bad token", frame: `{"login":{"id":"14","token":"abc.def.ghi"}}`, id: "14", code: 401, reason: ws.ReasonTokenInvalid},
		{name: "login with an expired token", frame: `{"login":{"id":"15","token":"` + expired + `"}}`, id: "15", code: 401, reason: ws.ReasonTokenExpired},
		{name: "login with a token expired within the leeway", frame: `{"login":{"id":"15b","token":"` + expiredLately + `"}}`, id: "15b", code: 401, reason: ws.ReasonTokenExpired},
		{name: "login as someone else", login: 1, frame: `{"login":{"id":"16","token":"` + c.token(t, 2) + `"}}`, id: "16", code: 409, reason: ws.ReasonAlreadyAuthenticated},
		{name: "note with an unknown what", login: 1, frame: `{"note":{"topic":"grp1","what":"dance"}}`, code: 400, reason: ws.ReasonInvalid,
			params: map[string]any{"field": "what"}},
		{name: "read note without seq", login: 1, frame: `{"note":{"topic":"grp1","what":"read"}}`, code: 400, reason: ws.ReasonInvalid,
			params: map[string]any{"field": "seq", "reason": "required"}},
		{name: "read note beyond the last seq", login: 1, frame: `{"note":{"topic":"grp1","what":"read","seq":"9"}}`, code: 400, reason: ws.ReasonInvalid,
			params: map[string]any{"field": "seq", "reason": "beyond_last_seq"}},
		{name: "pub naming a file the sender may not read", login: 1, frame: `{"pub":{"id":"18","topic":"grp1","client_msg_id":"c1","content":"x","head":{"files":["0190d7a4-5b1e-7c2d-8e3f-4a5b6c7d8e9f"]}}}`,
			id: "18", code: 403, reason: domain.ReasonFileNotReadable},
		{name: "the same frame type twice", frame: `{"ping":{"id":"d1"},"ping":{"id":"d2"}}`, id: "d1", code: 400, reason: ws.ReasonBadFrame},
		{name: "pub twice in one frame", login: 1, frame: `{"pub":{"id":"d3","topic":"grp1","client_msg_id":"c1","content":"p1"},"pub":{"id":"d4","topic":"grp1","client_msg_id":"c2","content":"p2"}}`,
			id: "d3", code: 400, reason: ws.ReasonBadFrame},
		{name: "a field twice", login: 1, frame: `{"sub":{"id":"d5","topic":"grp1","topic":"grp2"}}`, id: "d5", code: 400, reason: ws.ReasonBadFrame},
		{name: "a field twice, once escaped", login: 1, frame: `{"sub":{"id":"d6","topic":"grp1","\u0074opic":"grp2"}}`, id: "d6", code: 400, reason: ws.ReasonBadFrame},
		{name: "a field name in another case", login: 1, frame: `{"sub":{"id":"d7","TOPIC":"grp1"}}`, id: "d7", code: 400, reason: ws.ReasonBadFrame},
		{name: "get with a negative seq", login: 1, frame: `{"get":{"id":"17","topic":"grp1","after_seq":"-3"}}`, id: "17", code: 400, reason: ws.ReasonInvalid,
			params: map[string]any{"field": "after_seq", "reason": "bad_format"}},
		{name: "get with a signed seq", login: 1, frame: `{"get":{"id":"18","topic":"grp1","after_seq":"+5"}}`, id: "18", code: 400, reason: ws.ReasonInvalid,
			params: map[string]any{"field": "after_seq", "reason": "bad_format"}},
		{name: "get with a leading zero", login: 1, frame: `{"get":{"id":"19","topic":"grp1","before_seq":"05"}}`, id: "19", code: 400, reason: ws.ReasonInvalid,
			params: map[string]any{"field": "before_seq", "reason": "bad_format"}},
		{name: "get with an empty seq", login: 1, frame: `{"get":{"id":"20","topic":"grp1","after_seq":""}}`, id: "20", code: 400, reason: ws.ReasonInvalid,
			params: map[string]any{"field": "after_seq", "reason": "bad_format"}},
		{name: "get with the string null", login: 1, frame: `{"get":{"id":"21","topic":"grp1","after_seq":"null"}}`, id: "21", code: 400, reason: ws.ReasonInvalid,
			params: map[string]any{"field": "after_seq", "reason": "bad_format"}},
		{name: "get with a seq in exponent form", login: 1, frame: `{"get":{"id":"22","topic":"grp1","after_seq":1e3}}`, id: "22", code: 400, reason: ws.ReasonInvalid,
			params: map[string]any{"field": "after_seq", "reason": "bad_format"}},
		{name: "get with a seq of another type", login: 1, frame: `{"get":{"id":"23","topic":"grp1","after_seq":true}}`, id: "23", code: 400, reason: ws.ReasonBadFrame},
		{name: "read note with an empty seq", login: 1, frame: `{"note":{"topic":"grp1","what":"read","seq":""}}`, code: 400, reason: ws.ReasonInvalid,
			params: map[string]any{"field": "seq", "reason": "bad_format"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := dial(t, n, fmt.Sprintf("refused-%d", i), dialOpts{})
			if tt.login != 0 {
				cl.login(c, tt.login)
			}
			cl.write(tt.frame)
			fs := cl.waitFor("an error ctrl", func(fs []serverFrame) bool {
				for _, f := range fs {
					if f.Ctrl != nil && f.Ctrl.Code >= 400 {
						return true
					}
				}
				return false
			})
			var got ctrlFrame
			for _, f := range fs {
				if f.Ctrl != nil && f.Ctrl.Code >= 400 {
					got = *f.Ctrl
				}
			}
			if got.Code != tt.code || got.Reason != tt.reason || got.ID != tt.id || got.TS == "" {
				t.Fatalf("answer = %+v; want code %d reason %q id %q", got, tt.code, tt.reason, tt.id)
			}
			for k, v := range tt.params {
				if got.Params[k] != v {
					t.Errorf("params[%s] = %v, want %v (params %v)", k, got.Params[k], v, got.Params)
				}
			}
			// The connection survives a refused frame.
			if r := cl.call("after", `{"ping":{"id":"after"}}`); r.Code != 200 || r.Text != "pong" {
				t.Errorf("ping after the refusal = %+v", r)
			}
		})
	}
	if got := c.events(t); got != 0 {
		t.Errorf("%d events stored after refused frames, want 0", got)
	}
}

// newExpiredToken signs a token whose expiry is an hour in the past with the cluster's key.
func newExpiredToken(c *cluster) (string, error) {
	past, err := authSignerAt(time.Now().Add(-2 * time.Hour))
	if err != nil {
		return "", err
	}
	return past.Issue(acme, 1, time.Hour)
}

func TestOversizedFrameClosesWith1009(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := c.node(t, "node-a", nodeOpts{cfg: ws.Config{MaxFrameSize: 4096}})
	cl := dial(t, n, "big", dialOpts{})
	cl.login(c, 1)
	big := `{"pub":{"id":"big","topic":"grp1","client_msg_id":"c1","content":"` + strings.Repeat("x", 5000) + `"}}`
	cl.write(big)
	code, reason := cl.closed(5 * time.Second)
	if code != websocket.StatusMessageTooBig {
		t.Errorf("close status = %d %q, want 1009", code, reason)
	}
	var got *ctrlFrame
	for _, f := range cl.snapshot() {
		if f.Ctrl != nil && f.Ctrl.Code == 413 {
			got = f.Ctrl
		}
	}
	if got == nil || got.Reason != ws.ReasonFrameTooLarge {
		t.Errorf("no ctrl 413 frame_too_large before the close; frames %+v", cl.snapshot())
	}
	if n := c.events(t); n != 0 {
		t.Errorf("%d events stored, want 0", n)
	}
	if v := n.counter(t, "imledger_ws_refused_total", map[string]string{"reason": ws.ReasonFrameTooLarge}); v != 1 {
		t.Errorf("refused{frame_too_large} = %v, want 1", v)
	}
}

// TestRedisDownPubIsRetryable sends through a real send handler whose Redis is unreachable:
// the pub is answered 503 retry and nothing is stored.
func TestRedisDownPubIsRetryable(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	n := c.node(t, "node-a", nodeOpts{sender: c.sendHandler(t, dead, nil)})
	cl := dial(t, n, "retry", dialOpts{})
	cl.login(c, 1)
	r := cl.call("p", `{"pub":{"id":"p","topic":"grp1","client_msg_id":"c1","content":"hi"}}`)
	if r.Code != 503 || r.Reason != ws.ReasonRetry || r.Params["retryable"] != true {
		t.Fatalf("pub with Redis down = %+v, want 503 retry", r)
	}
	if n := c.events(t); n != 0 {
		t.Errorf("%d events stored, want 0", n)
	}
}
