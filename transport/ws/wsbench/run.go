package wsbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/coder/websocket"

	"github.com/imledger/imledger/domain"
)

// stats collects measurements from every client.
type stats struct {
	sent, acked, delivered, expected atomic.Int64

	mu      sync.Mutex
	ack     *hdrhistogram.Histogram // microseconds
	deliver *hdrhistogram.Histogram
	errors  map[string]int64
}

func newStats() *stats {
	return &stats{
		ack:     hdrhistogram.New(1, int64(5*time.Minute/time.Microsecond), 3),
		deliver: hdrhistogram.New(1, int64(5*time.Minute/time.Microsecond), 3),
		errors:  map[string]int64{},
	}
}

func (s *stats) record(h *hdrhistogram.Histogram, d time.Duration) {
	us := max(d.Microseconds(), 1)
	s.mu.Lock()
	_ = h.RecordValue(us) // values past the highest trackable are dropped, never fatal
	s.mu.Unlock()
}

func (s *stats) fail(reason string, n int64) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.errors[reason] += n
	s.mu.Unlock()
}

// Run connects the clients, has them send for Duration, waits up to Drain for the rest of the
// acks and deliveries, and returns the measurements. It fails only when the clients cannot be
// set up (a dial, login or sub refused) or ctx ends during setup; failures while sending are
// counted in Result.Errors.
func Run(ctx context.Context, o Options) (Result, error) {
	o.setDefaults()
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	var rid [4]byte
	_, _ = rand.Read(rid[:])
	st := newStats()
	clients, err := connectAll(ctx, o, st, hex.EncodeToString(rid[:]))
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.close()
			}
		}
	}()
	if err != nil {
		return Result{}, err
	}
	o.Logger.InfoContext(ctx, "wsbench: clients connected", "clients", len(clients), "groups", o.Groups)
	for _, c := range clients {
		c.reading.Store(true)
		go c.readLoop()
	}

	interval := time.Duration(float64(o.Clients) / o.Rate * float64(time.Second))
	sendCtx, stop := context.WithTimeout(ctx, o.Duration)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Spread the clients over one interval so they do not send in bursts.
			c.sendLoop(ctx, sendCtx, interval, time.Duration(i)*interval/time.Duration(len(clients)))
		}()
	}
	wg.Wait()
	stop()
	drain(ctx, o.Drain, st, clients)
	for _, c := range clients {
		c.close()
		st.fail("no_ack", int64(c.pendingCount()))
	}
	return Result{
		Clients: o.Clients, Groups: o.Groups, Rate: o.Rate, Duration: o.Duration,
		Sent: st.sent.Load(), Acked: st.acked.Load(), Delivered: st.delivered.Load(), Expected: st.expected.Load(),
		Errors: st.errors, Ack: summarize(st.ack), Deliver: summarize(st.deliver),
	}, nil
}

// drain waits until every pub is answered and every expected delivery arrived, or d passes.
func drain(ctx context.Context, d time.Duration, st *stats, clients []*client) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		pending := 0
		for _, c := range clients {
			pending += c.pendingCount()
		}
		if pending == 0 && st.delivered.Load() >= st.expected.Load() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// connectAll dials, logs in and subscribes every client, DialConcurrency at a time.
func connectAll(ctx context.Context, o Options, st *stats, runID string) ([]*client, error) {
	sizes := make([]int, o.Groups)
	for i := range o.Clients {
		sizes[i%o.Groups]++
	}
	clients := make([]*client, o.Clients)
	sem := make(chan struct{}, o.DialConcurrency)
	errs := make([]error, o.Clients)
	var wg sync.WaitGroup
	for i := range o.Clients {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c := &client{
				st: st, user: domain.UserID(o.FirstUser + int64(i)), runID: runID, index: i,
				topic:     fmt.Sprintf("grp%d", o.FirstGroup+int64(i%o.Groups)),
				groupSize: sizes[i%o.Groups], pad: strings.Repeat("x", o.ContentBytes), pending: map[string]time.Time{},
				done: make(chan struct{}),
			}
			clients[i] = c
			errs[i] = c.connect(ctx, o)
		}()
	}
	wg.Wait()
	return clients, errors.Join(errs...)
}

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
	done      chan struct{}

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

// content is what a benchmark message carries.
type content struct {
	SentNS int64  `json:"bench_ts"`
	Pad    string `json:"pad"`
}

func (c *client) readLoop() {
	defer close(c.done)
	self := c.user.String()
	for {
		_, b, err := c.conn.Read(context.Background())
		if err != nil {
			if !c.closing.Load() {
				c.st.fail("connection", 1)
			}
			return
		}
		now := time.Now()
		var f serverFrame
		if json.Unmarshal(b, &f) != nil {
			c.st.fail("bad_frame", 1)
			continue
		}
		switch {
		case f.Data != nil && f.Data.From != self:
			var body content
			if json.Unmarshal(f.Data.Content, &body) == nil && body.SentNS > 0 {
				c.st.delivered.Add(1)
				c.st.record(c.st.deliver, now.Sub(time.Unix(0, body.SentNS)))
			}
		case f.Ctrl != nil:
			c.answered(f.Ctrl.ID, f.Ctrl.Code, f.Ctrl.Reason, now)
		}
	}
}

// answered accounts for the ctrl answering a pub.
func (c *client) answered(id string, code int, reason string, now time.Time) {
	c.mu.Lock()
	sent, ok := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if !ok {
		return
	}
	if code != 202 {
		c.st.fail(reason, 1)
		return
	}
	c.st.acked.Add(1)
	c.st.expected.Add(int64(c.groupSize - 1))
	c.st.record(c.st.ack, now.Sub(sent))
}

// sendLoop publishes one message per interval, after an initial offset, until sending ends.
// Writes run under ctx, not under sending: a write cut off by its context closes the connection.
func (c *client) sendLoop(ctx, sending context.Context, interval, offset time.Duration) {
	select {
	case <-sending.Done():
		return
	case <-time.After(offset):
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	keepAlive := time.NewTicker(20 * time.Second)
	defer keepAlive.Stop()
	for k := 0; ; k++ {
		if err := c.publish(ctx, k); err != nil {
			if ctx.Err() == nil {
				c.st.fail("connection", 1)
			}
			return
		}
		select {
		case <-sending.Done():
			return
		case <-tick.C:
		case <-keepAlive.C:
			// Slow senders still show the gateway they are alive.
			if err := c.write(ctx, []byte(`{"ping":{}}`)); err != nil {
				return
			}
			select {
			case <-sending.Done():
				return
			case <-tick.C:
			}
		}
	}
}

// writeTimeout bounds one frame write.
const writeTimeout = 10 * time.Second

func (c *client) write(ctx context.Context, b []byte) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	return c.conn.Write(ctx, websocket.MessageText, b)
}

func (c *client) publish(ctx context.Context, k int) error {
	id := fmt.Sprintf("p%d", k)
	now := time.Now()
	body, _ := json.Marshal(content{SentNS: now.UnixNano(), Pad: c.pad})
	frame := fmt.Sprintf(`{"pub":{"id":%q,"topic":%q,"client_msg_id":"b%s-%d-%d","content":%s}}`, id, c.topic, c.runID, c.index, k, body)
	c.mu.Lock()
	c.pending[id] = now
	c.mu.Unlock()
	if err := c.write(ctx, []byte(frame)); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
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
