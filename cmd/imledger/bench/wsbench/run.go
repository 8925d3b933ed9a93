package wsbench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

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

// Run connects the clients, has the senders publish for Duration (or, with Idle, holds the
// connections for Duration), waits up to Drain for the rest of the acks and deliveries, and
// returns the measurements. It fails only when the clients cannot be set up (a dial, login or
// sub refused) or ctx ends during setup; failures while sending are counted in Result.Errors.
func Run(ctx context.Context, o Options) (Result, error) {
	o.setDefaults()
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	var rid [4]byte
	_, _ = rand.Read(rid[:])
	st := newStats()
	setupStart := time.Now()
	clients, err := connectAll(ctx, o, st, hex.EncodeToString(rid[:]))
	defer closeAll(clients)
	if err != nil {
		return Result{}, err
	}
	setup := time.Since(setupStart)
	o.Logger.InfoContext(ctx, "wsbench: clients connected", "clients", len(clients), "groups", o.Groups, "took", setup.Round(time.Millisecond))
	for _, c := range clients {
		c.reading.Store(true)
		go c.readLoop()
	}

	window, stop := context.WithTimeout(ctx, o.Duration)
	monitorDone := make(chan struct{})
	go func() {
		defer close(monitorDone)
		if o.Monitor != nil {
			o.Monitor(window)
		}
	}()
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Pings, like sends, are spread over their interval so they do not come in bursts.
			c.keepAlive(window, time.Duration(i)*keepAliveInterval/time.Duration(len(clients)))
		}()
		if o.Idle || i >= o.Senders {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if o.Rate == 0 {
				c.sendUnpaced(ctx, window)
				return
			}
			interval := time.Duration(float64(o.Senders) / o.Rate * float64(time.Second))
			c.sendLoop(ctx, window, interval, time.Duration(i)*interval/time.Duration(o.Senders))
		}()
	}
	wg.Wait()
	stop()
	<-monitorDone
	if !o.Idle {
		drain(ctx, o.Drain, st, clients)
	}
	closeAll(clients)
	lost := int64(0)
	for _, c := range clients {
		if c.lost.Load() {
			lost++
		}
		st.fail("no_ack", int64(c.pendingCount()))
	}
	return Result{
		Clients: o.Clients, Groups: o.Groups, Senders: o.Senders, Rate: o.Rate, InFlight: o.InFlight, Idle: o.Idle,
		Duration: o.Duration, Setup: setup, Held: int64(len(clients)) - lost,
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

// connectAll dials, logs in and subscribes every client, DialConcurrency at a time. It stops
// dialling at the first failure.
func connectAll(ctx context.Context, o Options, st *stats, runID string) ([]*client, error) {
	sizes := make([]int, o.Groups)
	for i := range o.Clients {
		sizes[i%o.Groups]++
	}
	pad := padding(o.ContentBytes)
	clients := make([]*client, o.Clients)
	sem := make(chan struct{}, o.DialConcurrency)
	errs := make([]error, o.Clients)
	var (
		wg     sync.WaitGroup
		failed atomic.Bool
	)
	for i := range o.Clients {
		sem <- struct{}{}
		if failed.Load() || ctx.Err() != nil {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c := &client{
				st: st, user: domain.UserID(o.FirstUser + int64(i)), runID: runID, index: i,
				topic:     fmt.Sprintf("grp%d", o.FirstGroup+int64(i%o.Groups)),
				groupSize: sizes[i%o.Groups], pad: pad, pending: map[string]time.Time{},
				done: make(chan struct{}),
			}
			if o.InFlight > 0 {
				c.slots = make(chan struct{}, o.InFlight)
			}
			clients[i] = c
			if errs[i] = c.connect(ctx, o); errs[i] != nil {
				failed.Store(true)
			}
		}()
	}
	wg.Wait()
	var first error
	failures := 0
	for _, err := range errs {
		if err != nil {
			failures++
			first = cmp.Or(first, err)
		}
	}
	if first != nil {
		return clients, fmt.Errorf("wsbench: %d clients failed to set up, the first: %w", failures, first)
	}
	return clients, ctx.Err()
}

// closeAll closes the clients that were created, a few at a time: each close waits for the
// gateway's answer to its close frame.
func closeAll(clients []*client) {
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, c := range clients {
		if c == nil {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c.close()
		}()
	}
	wg.Wait()
}
