package wsbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/imledger/imledger/domain"
)

// client is one benchmark connection.
type client struct {
	st        *stats
	user      domain.UserID
	runID     string
	index     int
	topic     string
	groupSize int
	pad       string
	conn      *websocket.Conn
	closing   atomic.Bool
	reading   atomic.Bool
	lost      atomic.Bool   // the connection ended before the client closed it
	done      chan struct{} // closed when the reader returns
	slots     chan struct{} // a token per pub in flight; nil: unbounded

	mu      sync.Mutex
	pending map[string]time.Time // pub frame id -> when it was written
}

// connect dials, logs in and subscribes, reading the answers synchronously.
func (c *client) connect(ctx context.Context, o Options) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tok, err := o.Tokens.Issue(o.Tenant, c.user, o.Duration+o.Drain+time.Hour)
	if err != nil {
		return fmt.Errorf("client %d: token: %w", c.index, err)
	}
	c.conn, _, err = websocket.Dial(ctx, o.URLs[c.index%len(o.URLs)], nil)
	if err != nil {
		return fmt.Errorf("client %d: dial: %w", c.index, err)
	}
	c.conn.SetReadLimit(4 << 20)
	steps := []struct{ id, frame string }{
		{"login", fmt.Sprintf(`{"login":{"id":"login","token":%q}}`, tok)},
		{"sub", fmt.Sprintf(`{"sub":{"id":"sub","topic":%q}}`, c.topic)},
	}
	for _, s := range steps {
		if err := c.conn.Write(ctx, websocket.MessageText, []byte(s.frame)); err != nil {
			return fmt.Errorf("client %d: %s: %w", c.index, s.id, err)
		}
		if err := c.awaitCtrl(ctx, s.id); err != nil {
			return fmt.Errorf("client %d: %s: %w", c.index, s.id, err)
		}
	}
	return nil
}

// serverFrame is the part of a server frame the benchmark reads.
type serverFrame struct {
	Ctrl *struct {
		ID     string `json:"id"`
		Code   int    `json:"code"`
		Reason string `json:"reason"`
	} `json:"ctrl"`
	Data *struct {
		From    string          `json:"from"`
		Content json.RawMessage `json:"content"`
	} `json:"data"`
}

// awaitCtrl reads until the ctrl answering id, which must be a success.
func (c *client) awaitCtrl(ctx context.Context, id string) error {
	for {
		_, b, err := c.conn.Read(ctx)
		if err != nil {
			return err
		}
		var f serverFrame
		if json.Unmarshal(b, &f) == nil && f.Ctrl != nil && f.Ctrl.ID == id {
			if f.Ctrl.Code >= 300 {
				return fmt.Errorf("refused: %d %s", f.Ctrl.Code, f.Ctrl.Reason)
			}
			return nil
		}
	}
}

// readLoop reads server frames until the connection ends: it times and checks the deliveries of
// other clients' messages and matches acks to pubs.
func (c *client) readLoop() {
	defer close(c.done)
	self := c.user.String()
	var buf bytes.Buffer
	var scratch []byte
	for {
		buf.Reset()
		_, r, err := c.conn.Reader(context.Background())
		if err == nil {
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			if !c.closing.Load() {
				c.lost.Store(true)
				c.st.fail("connection", 1)
			}
			return
		}
		now := time.Now()
		var f serverFrame
		if json.Unmarshal(buf.Bytes(), &f) != nil {
			c.st.fail("bad_frame", 1)
			continue
		}
		switch {
		case f.Data != nil && f.Data.From != self:
			var (
				body      contentFields
				exact, ok bool
			)
			body, exact, ok, scratch = checkContent(f.Data.Content, scratch)
			switch {
			case !ok:
				continue // a message not sent by the benchmark
			case !exact:
				c.st.fail("content_mismatch", 1)
			}
			c.st.delivered.Add(1)
			c.st.record(c.st.deliver, now.Sub(time.Unix(0, body.SentNS)))
		case f.Ctrl != nil:
			c.answered(f.Ctrl.ID, f.Ctrl.Code, f.Ctrl.Reason, now)
		}
	}
}

// answered accounts for the ctrl answering a pub: the ack must echo the pub's frame id.
func (c *client) answered(id string, code int, reason string, now time.Time) {
	c.mu.Lock()
	sent, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if !ok {
		return
	}
	if c.slots != nil {
		<-c.slots
	}
	if code != 202 {
		c.st.fail(reason, 1)
		return
	}
	c.st.acked.Add(1)
	c.st.expected.Add(int64(c.groupSize - 1))
	c.st.record(c.st.ack, now.Sub(sent))
}

// sendLoop publishes one message per interval, after an initial offset, until the window ends.
// With in-flight slots a tick waits for a free slot. Writes run under ctx, not under window: a
// write cut off by its context closes the connection.
func (c *client) sendLoop(ctx, window context.Context, interval, offset time.Duration) {
	select {
	case <-window.Done():
		return
	case <-time.After(offset):
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for k := 0; ; k++ {
		if !c.acquire(window) {
			return
		}
		if err := c.publish(ctx, k); err != nil {
			c.sendFailed(ctx)
			return
		}
		select {
		case <-window.Done():
			return
		case <-tick.C:
		}
	}
}

// sendUnpaced publishes whenever an in-flight slot is free, until the window ends.
func (c *client) sendUnpaced(ctx, window context.Context) {
	for k := 0; c.acquire(window); k++ {
		if err := c.publish(ctx, k); err != nil {
			c.sendFailed(ctx)
			return
		}
	}
}

// acquire takes an in-flight slot, waiting for one; false when the window ended or the
// connection is gone.
func (c *client) acquire(window context.Context) bool {
	if c.slots == nil {
		return window.Err() == nil
	}
	select {
	case c.slots <- struct{}{}:
		return window.Err() == nil
	case <-window.Done():
		return false
	case <-c.done:
		return false
	}
}

func (c *client) sendFailed(ctx context.Context) {
	if ctx.Err() == nil && !c.lost.Load() {
		c.st.fail("connection", 1)
	}
}

// keepAliveInterval is how often every client pings: well within the gateway's idle timeout.
const keepAliveInterval = 20 * time.Second

// keepAlive pings the gateway every keepAliveInterval, after an initial offset, until the window
// ends, so connections that send nothing stay open.
func (c *client) keepAlive(ctx, window context.Context, offset time.Duration) {
	t := time.NewTimer(offset)
	defer t.Stop()
	for {
		select {
		case <-window.Done():
			return
		case <-c.done:
			return
		case <-t.C:
		}
		if err := c.write(ctx, []byte(`{"ping":{}}`)); err != nil {
			return
		}
		t.Reset(keepAliveInterval)
	}
}

// writeTimeout bounds one frame write.
const writeTimeout = 10 * time.Second

func (c *client) write(ctx context.Context, b []byte) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return c.conn.Write(ctx, websocket.MessageText, b)
}

// publish writes pub k. Its frame id is "p<k>"; the ack must echo it.
func (c *client) publish(ctx context.Context, k int) error {
	id := "p" + strconv.Itoa(k)
	now := time.Now()
	frame := make([]byte, 0, 160+len(c.pad))
	frame = append(frame, `{"pub":{"id":"`...)
	frame = append(frame, id...)
	frame = append(frame, `","topic":"`...)
	frame = append(frame, c.topic...)
	frame = fmt.Appendf(frame, `","client_msg_id":"b%s-%d-%d","content":`, c.runID, c.index, k)
	frame = appendContent(frame, now.UnixNano(), c.index, k, c.pad)
	frame = append(frame, `}}`...)
	c.mu.Lock()
	c.pending[id] = now
	c.mu.Unlock()
	if err := c.write(ctx, frame); err != nil {
		c.mu.Lock()
		_, unanswered := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if unanswered && c.slots != nil {
			<-c.slots
		}
		return err
	}
	c.st.sent.Add(1)
	return nil
}

func (c *client) pendingCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// close ends the connection and waits for its reader.
func (c *client) close() {
	if c.conn == nil || !c.closing.CompareAndSwap(false, true) {
		return
	}
	if !c.reading.Load() {
		_ = c.conn.CloseNow()
		return
	}
	_ = c.conn.Close(websocket.StatusNormalClosure, "")
	select {
	case <-c.done:
	case <-time.After(2 * time.Second):
		_ = c.conn.CloseNow()
	}
}
