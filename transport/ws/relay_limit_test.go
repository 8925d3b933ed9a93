package ws_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/transport/ws"
)

// TestTypingIsRelayedOncePerInterval: a member pipelining thousands of typing notes gets one kp
// per topic per ws.typing_interval relayed; the other members get a few info frames and stay
// connected instead of being dropped as slow consumers.
func TestTypingIsRelayedOncePerInterval(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := c.node(t, "node-a", nodeOpts{})
	a := dial(t, n, "a", dialOpts{})
	a.login(c, 1)
	a.sub("grp1")
	b := dial(t, n, "b", dialOpts{})
	b.login(c, 2)
	b.sub("grp1")
	kps := func() int {
		k := 0
		for _, f := range b.snapshot() {
			if f.Info != nil && f.Info.What == "kp" && f.Info.From == "1" {
				k++
			}
		}
		return k
	}
	burst := func(notes int, id string) {
		frames := strings.Repeat(`{"note":{"topic":"grp1","what":"kp"}}`+"\n", notes)
		for f := range strings.Lines(frames) {
			a.write(strings.TrimSpace(f))
		}
		if r := a.call(id, `{"ping":{"id":"`+id+`"}}`); r.Code != 200 {
			t.Fatalf("ping = %+v", r)
		}
		time.Sleep(200 * time.Millisecond) // room for more info frames to show up
	}
	start := time.Now()
	burst(3000, "after-first")
	// The burst lasts well under a second or two: at most one kp per second of it.
	if got, most := kps(), 1+int(time.Since(start)/time.Second); got < 1 || got > most {
		t.Fatalf("%d kp info frames relayed for 3000 notes in %s, want 1 to %d", got, time.Since(start), most)
	}
	before := kps()
	time.Sleep(1100 * time.Millisecond)
	burst(1, "after-second")
	if got := kps(); got != before+1 {
		t.Fatalf("a kp a second after the last one: %d kp info frames, want %d", got, before+1)
	}
	if r := b.call("alive", `{"ping":{"id":"alive"}}`); r.Code != 200 {
		t.Fatalf("b after the burst: %+v", r)
	}
}

// TestSubAndLeaveAreRateLimited: a session flapping sub and leave is answered 429 rate_limited
// (limit ws_sub_leave, retry_after_ms) past ws.sub_burst, so the topic's other members get a
// bounded number of pres frames; after retry_after_ms the session subscribes again.
func TestSubAndLeaveAreRateLimited(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	n := c.node(t, "node-a", nodeOpts{cfg: ws.Config{SubRate: 10, SubBurst: 20}})
	a := dial(t, n, "a", dialOpts{})
	a.login(c, 1)
	b := dial(t, n, "b", dialOpts{})
	b.login(c, 2)
	b.sub("grp1")
	const pairs = 200
	start := time.Now()
	for i := range pairs {
		a.write(fmt.Sprintf(`{"sub":{"id":"s%d","topic":"grp1"}}`, i))
		a.write(fmt.Sprintf(`{"leave":{"id":"l%d","topic":"grp1"}}`, i))
	}
	var limited *ctrlFrame
	for i := range pairs {
		for _, id := range []string{fmt.Sprintf("s%d", i), fmt.Sprintf("l%d", i)} {
			r := a.ctrl(id)
			switch r.Code {
			case 200: // a leave after a refused sub is answered 200 and changes nothing
			case 429:
				if limited == nil {
					limited = &r
				}
			default:
				t.Fatalf("%s = %+v", id, r)
			}
		}
	}
	elapsed := time.Since(start)
	if limited == nil || limited.Reason != ws.ReasonRateLimited || limited.Params["limit"] != "ws_sub_leave" {
		t.Fatalf("no 429 rate_limited ws_sub_leave among %d subs and leaves; first refusal %+v", 2*pairs, limited)
	}
	wait, _ := limited.Params["retry_after_ms"].(float64)
	if wait <= 0 || wait > 1000 {
		t.Fatalf("retry_after_ms = %v", limited.Params["retry_after_ms"])
	}
	time.Sleep(100 * time.Millisecond)
	pres := 0
	for _, f := range b.snapshot() {
		if f.Pres != nil && f.Pres.Src == "1" {
			pres++
		}
	}
	// One per sub or leave that went through: 20 at once, then 10 a second.
	if most := 20 + int(10*elapsed.Seconds()) + 1; pres < 20 || pres > most {
		t.Fatalf("b got %d pres frames of a for %d subs and leaves in %s, want 20 to %d", pres, 2*pairs, elapsed, most)
	}
	time.Sleep(time.Duration(wait)*time.Millisecond + 200*time.Millisecond)
	a.sub("grp1")
}
