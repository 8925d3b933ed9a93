package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/imledger/imledger/transport/ws"
)

// wsFrame is one server frame; exactly one field is set.
type wsFrame struct {
	Ctrl *wsCtrl `json:"ctrl"`
	Data *wsData `json:"data"`
	Me   *wsMe   `json:"me"`
	Pres *struct {
		Topic string `json:"topic"`
		What  string `json:"what"`
	} `json:"pres"`
	Info *struct {
		Topic   string          `json:"topic"`
		What    string          `json:"what"`
		Src     string          `json:"src"`
		Seq     string          `json:"seq"`
		Version string          `json:"version"`
		Content json.RawMessage `json:"content"`
	} `json:"info"`
}

// wsMe is a frame of the per-user channel.
type wsMe struct {
	Seq     string          `json:"seq"`
	Epoch   string          `json:"epoch"`
	What    string          `json:"what"`
	Topic   string          `json:"topic"`
	From    string          `json:"from"`
	Src     string          `json:"src"`
	MsgSeq  string          `json:"msg_seq"`
	ReadSeq string          `json:"read_seq"`
	Content json.RawMessage `json:"content"`
}

type wsCtrl struct {
	ID     string         `json:"id"`
	Code   int            `json:"code"`
	Text   string         `json:"text"`
	Reason string         `json:"reason"`
	Params map[string]any `json:"params"`
}

type wsData struct {
	Topic     string          `json:"topic"`
	Seq       string          `json:"seq"`
	From      string          `json:"from"`
	MessageID string          `json:"message_id"`
	Content   json.RawMessage `json:"content"`
}

// seq is the frame's seq as a number.
func (d *wsData) seq() int64 {
	n, _ := strconv.ParseInt(d.Seq, 10, 64)
	return n
}

// wsClient is a WebSocket client of the gateway that records every frame it receives.
type wsClient struct {
	t    *testing.T
	name string
	conn *websocket.Conn

	mu      sync.Mutex
	frames  []wsFrame
	closed  bool
	readErr error         // why reading ended
	done    chan struct{} // closed when reading ended
}

// dialWS connects to the gateway of base and logs in with u's token.
func dialWS(t *testing.T, base string, u user, name string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws://"+strings.TrimPrefix(base, "http://")+ws.Path, nil)
	if err != nil {
		t.Fatalf("%s: dial: %v", name, err)
	}
	conn.SetReadLimit(1 << 20)
	c := &wsClient{t: t, name: name, conn: conn, done: make(chan struct{})}
	go c.read()
	t.Cleanup(c.close)
	c.write(`{"hi":{"id":"hi","ver":"1","ua":"imledger-test"}}`)
	c.write(fmt.Sprintf(`{"login":{"id":"login","token":%q}}`, u.token))
	if r := c.ctrl("login"); r.Code != 200 {
		t.Fatalf("%s: login: %+v", name, r)
	}
	return c
}

func (c *wsClient) read() {
	defer close(c.done)
	for {
		_, b, err := c.conn.Read(context.Background())
		if err != nil {
			c.mu.Lock()
			c.readErr = err
			c.mu.Unlock()
			return
		}
		var f wsFrame
		if json.Unmarshal(b, &f) == nil {
			c.mu.Lock()
			c.frames = append(c.frames, f)
			c.mu.Unlock()
		}
	}
}

func (c *wsClient) write(frame string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.conn.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		c.t.Fatalf("%s: write: %v", c.name, err)
	}
}

// close closes the connection normally; closing twice is harmless.
func (c *wsClient) close() {
	c.mu.Lock()
	closed := c.closed
	c.closed = true
	c.mu.Unlock()
	if !closed {
		_ = c.conn.Close(websocket.StatusNormalClosure, "bye")
	}
}

// waitFor polls until cond holds on the frames received so far, or fails after 30 s.
func (c *wsClient) waitFor(what string, cond func([]wsFrame) bool) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		frames := c.frames[:len(c.frames):len(c.frames)]
		c.mu.Unlock()
		if cond(frames) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: never got %s", c.name, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ctrl waits for the ctrl frame answering id.
func (c *wsClient) ctrl(id string) wsCtrl {
	c.t.Helper()
	var got wsCtrl
	c.waitFor("the answer to "+id, func(fs []wsFrame) bool {
		for _, f := range fs {
			if f.Ctrl != nil && f.Ctrl.ID == id {
				got = *f.Ctrl
				return true
			}
		}
		return false
	})
	return got
}

// sub subscribes to topic.
func (c *wsClient) sub(topic string) {
	c.t.Helper()
	c.write(fmt.Sprintf(`{"sub":{"id":"sub-%s","topic":%q}}`, topic, topic))
	if r := c.ctrl("sub-" + topic); r.Code != 200 {
		c.t.Fatalf("%s: sub %s: %+v", c.name, topic, r)
	}
}

// data returns the data frames received so far.
func (c *wsClient) data() []wsData {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []wsData
	for _, f := range c.frames {
		if f.Data != nil {
			out = append(out, *f.Data)
		}
	}
	return out
}

// publish sends count messages to topic without waiting, then waits for every ack and returns
// the acked seqs in order. Frame ids and client_msg_ids are prefix-<k>.
func (c *wsClient) publish(topic, prefix string, count int) []int64 {
	c.t.Helper()
	for k := range count {
		c.write(fmt.Sprintf(`{"pub":{"id":"%s-%d","topic":%q,"client_msg_id":"%s-%d","content":{"text":"%s %d"}}}`,
			prefix, k, topic, prefix, k, c.name, k))
	}
	seqs := make([]int64, count)
	for k := range count {
		r := c.ctrl(fmt.Sprintf("%s-%d", prefix, k))
		s, _ := r.Params["seq"].(string)
		if r.Code != 202 || s == "" {
			c.t.Fatalf("%s: ack of %s-%d: %+v", c.name, prefix, k, r)
		}
		seqs[k], _ = strconv.ParseInt(s, 10, 64)
	}
	return seqs
}

// history sends get after afterSeq and returns the page's data frames and its ctrl. Frames that
// arrive meanwhile from subscriptions are not told apart: use it on a connection without any.
func (c *wsClient) history(id, topic string, afterSeq int64, limit int) ([]wsData, wsCtrl) {
	c.t.Helper()
	c.mu.Lock()
	c.frames = nil
	c.mu.Unlock()
	c.write(fmt.Sprintf(`{"get":{"id":%q,"topic":%q,"after_seq":"%d","limit":%d}}`, id, topic, afterSeq, limit))
	r := c.ctrl(id)
	return c.data(), r
}

// endedWith waits until the server ended the session: a ctrl frame without id naming reason,
// then a close 1008 with reason as its text.
func (c *wsClient) endedWith(reason string, within time.Duration) {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(within):
		c.t.Fatalf("%s: still open %s after the change that ends it", c.name, within)
	}
	c.mu.Lock()
	err, frames := c.readErr, c.frames
	c.mu.Unlock()
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || ce.Reason != reason {
		c.t.Fatalf("%s: ended with %v, want close 1008 %q", c.name, err, reason)
	}
	for _, f := range frames {
		if f.Ctrl != nil && f.Ctrl.ID == "" && f.Ctrl.Reason == reason {
			return
		}
	}
	c.t.Fatalf("%s: no ctrl frame with reason %s before the close", c.name, reason)
}

// me returns the channel frames received so far.
func (c *wsClient) me() []wsMe {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []wsMe
	for _, f := range c.frames {
		if f.Me != nil {
			out = append(out, *f.Me)
		}
	}
	return out
}

// waitMe waits for a channel frame of kind what in topic and returns it.
func (c *wsClient) waitMe(what, topic string) wsMe {
	c.t.Helper()
	var got wsMe
	c.waitFor(what+" in "+topic+" on the channel", func([]wsFrame) bool {
		for _, m := range c.me() {
			if m.What == what && m.Topic == topic {
				got = m
				return true
			}
		}
		return false
	})
	return got
}
