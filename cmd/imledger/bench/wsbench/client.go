package wsbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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
	conn      *wsConn
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
	if c.conn, err = dial(ctx, o.URLs[c.index%len(o.URLs)]); err != nil {
		return fmt.Errorf("client %d: dial: %w", c.index, err)
	}
	deadline, _ := ctx.Deadline()
	_ = c.conn.conn.SetReadDeadline(deadline)
	steps := []struct{ id, frame string }{
		{"login", fmt.Sprintf(`{"login":{"id":"login","token":%q}}`, tok)},
		{"sub", fmt.Sprintf(`{"sub":{"id":"sub","topic":%q}}`, c.topic)},
	}
	if o.Channel {
		steps = append(steps, struct{ id, frame string }{"me", `{"sub":{"id":"me","topic":"me"}}`})
	}
	for _, s := range steps {
		if err := c.conn.WriteText([]byte(s.frame)); err != nil {
			return fmt.Errorf("client %d: %s: %w", c.index, s.id, err)
		}
		if err := c.awaitCtrl(s.id); err != nil {
			return fmt.Errorf("client %d: %s: %w", c.index, s.id, err)
		}
	}
	return c.conn.conn.SetReadDeadline(time.Time{})
}

// serverFrame is the part of a server frame the benchmark reads; the byte slices point into
// the message read.
type serverFrame struct {
	isCtrl, isData bool
	// ctrl
	id, reason []byte
	code       int64
	// data
	from, content []byte
}

// parseFrame reads the frame type and the fields the benchmark needs.
func parseFrame(b []byte) (f serverFrame, err error) {
	var inner error
	err = members(b, func(key, value []byte) bool {
		switch string(key) {
		case "ctrl":
			f.isCtrl = true
			inner = members(value, func(k, v []byte) bool {
				switch string(k) {
				case "id":
					f.id, _ = plainString(v)
				case "code":
					f.code, _ = integer(v)
				case "reason":
					f.reason, _ = plainString(v)
				}
				return true
			})
		case "data":
			f.isData = true
			inner = members(value, func(k, v []byte) bool {
				switch string(k) {
				case "from":
					f.from, _ = plainString(v)
				case "content":
					f.content = v
				}
				return true
			})
		}
		return true
	})
	return f, errors.Join(err, inner)
}

// awaitCtrl reads until the ctrl answering id, which must be a success.
func (c *client) awaitCtrl(id string) error {
	for {
		b, err := c.conn.ReadMessage()
		if err != nil {
			return err
		}
		f, err := parseFrame(b)
		if err == nil && f.isCtrl && string(f.id) == id {
			if f.code >= 300 {
				return fmt.Errorf("refused: %d %s", f.code, f.reason)
			}
			return nil
		}
	}
}

// readLoop reads server frames until the connection ends: it times and checks the deliveries of
// other clients' messages and matches acks to pubs.
func (c *client) readLoop() {
	defer close(c.done)
	self := []byte(c.user.String())
	var scratch []byte
	for {
		b, err := c.conn.ReadMessage()
		if err != nil {
			if !c.closing.Load() {
				c.lost.Store(true)
				c.st.fail("connection", 1)
			}
			return
		}
		now := time.Now()
		f, err := parseFrame(b)
		if err != nil {
			c.st.fail("bad_frame", 1)
			continue
		}
		switch {
		case f.isData && !bytes.Equal(f.from, self):
			var (
				body      contentFields
				exact, ok bool
			)
			body, exact, ok, scratch = checkContent(f.content, c.pad, scratch)
			switch {
			case !ok:
				continue // a message not sent by the benchmark
			case !exact:
				c.st.fail("content_mismatch", 1)
			}
			c.st.delivered.Add(1)
			c.st.record(c.st.deliver, now.Sub(time.Unix(0, body.SentNS)))
		case f.isCtrl:
			c.answered(f.id, int(f.code), f.reason, now)
		}
	}
}

// answered accounts for the ctrl answering a pub: the ack must echo the pub's frame id.
func (c *client) answered(id []byte, code int, reason []byte, now time.Time) {
	c.mu.Lock()
	sent, ok := c.pending[string(id)]
	if ok {
		delete(c.pending, string(id))
	}
	c.mu.Unlock()
	if !ok {
		return
	}
	if c.slots != nil {
		<-c.slots
	}
	if code != 202 {
		c.st.fail(string(reason), 1)
		return
	}
	c.st.acked.Add(1)
	c.st.expected.Add(int64(c.groupSize - 1))
	c.st.record(c.st.ack, now.Sub(sent))
}

// sendLoop publishes one message per interval, after an initial offset, until the window ends.
// With in-flight slots a tick waits for a free slot. A write is bounded by writeTimeout, not by
// the window: the last pub goes out whole.
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
		if err := c.publish(k); err != nil {
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
		if err := c.publish(k); err != nil {
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
func (c *client) keepAlive(window context.Context, offset time.Duration) {
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
		if err := c.write([]byte(`{"ping":{}}`)); err != nil {
			return
		}
		t.Reset(keepAliveInterval)
	}
}

func (c *client) write(b []byte) error { return c.conn.WriteText(b) }

// publish writes pub k. Its frame id is "p<k>"; the ack must echo it.
func (c *client) publish(k int) error {
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
	if err := c.write(frame); err != nil {
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
		_ = c.conn.Close()
		return
	}
	_ = c.conn.CloseNormal()
	select {
	case <-c.done:
	case <-time.After(2 * time.Second):
	}
	_ = c.conn.Close()
	<-c.done
}
