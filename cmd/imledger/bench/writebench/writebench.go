package writebench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
)

// MessageSender is anything that handles message.SendMessage; *message.SendMessageHandler is one.
type MessageSender interface {
	Handle(ctx context.Context, cmd message.SendMessage) (message.SendResult, error)
}

var _ MessageSender = (*message.SendMessageHandler)(nil)

// BenchWriteOptions shapes a write benchmark. The zero value (plus a tenant) runs 50 senders
// over 100 group topics for 10 s.
type BenchWriteOptions struct {
	// Tenant receives the messages. Required.
	Tenant domain.TenantID
	// Senders is the number of concurrent senders, each a user (ids 1..Senders) sending one
	// message at a time. Default 50.
	Senders int
	// Topics is the number of group topics written to, grp<FirstGroupID>…; every sender cycles
	// through all of them. Default 100.
	Topics int
	// FirstGroupID is the group id of the first topic. Default 1.
	FirstGroupID int64
	// Count stops the run after this many sends in total. When 0, Duration decides.
	Count int
	// Duration stops the run after this long (sends in flight finish). Default 10 s.
	Duration time.Duration
	// ContentBytes is the approximate size of each text message. Default 100.
	ContentBytes int
	// RunID prefixes every client_msg_id so runs never collide: up to 47 of [A-Za-z0-9._:-].
	// Default: random.
	RunID string
	// Alternate, with Slice, compares two senders in one run: after a first slice of warm-up
	// (through the sender passed to BenchWrite, not counted), Duration is cut into slices that go
	// in turn to the sender passed to BenchWrite (A) and to Alternate (B) in the order ABBA ABBA
	// ..., so both see the same machine, the same stores and the same state of them, and a steady
	// drift of the machine's speed falls on both alike. Duration must be whole ABBA rounds; Count
	// must be 0.
	Alternate MessageSender
	// Slice is the length of one slice of an alternating run.
	Slice time.Duration
}

// BenchWriteResult is what a write benchmark measured. Latencies are per send, from Handle's
// call to its return.
type BenchWriteResult struct {
	Sends       int64 // successful sends
	Errors      int64 // failed sends
	FirstError  error // the first failure, for the report
	Elapsed     time.Duration
	SendsPerSec float64 // successful sends per second of Elapsed
	P50         time.Duration
	P99         time.Duration
	Max         time.Duration
	// Of an alternating run: the successful sends started in the slices of each sender ([0] the
	// one passed to BenchWrite, [1] Alternate; the warm-up's are in Sends only) and their rates
	// over half of Duration each.
	SliceSends   [2]int64
	SliceRates   [2]float64
	SlicesPerRun int // how many slices the run had
}

// String formats the result on one line.
func (r BenchWriteResult) String() string {
	s := fmt.Sprintf("sends=%d errors=%d elapsed=%s rate=%.0f/s p50=%s p99=%s max=%s",
		r.Sends, r.Errors, r.Elapsed.Round(time.Millisecond), r.SendsPerSec, r.P50, r.P99, r.Max)
	if r.FirstError != nil {
		s += " first_error=" + strconv.Quote(r.FirstError.Error())
	}
	return s
}

func (o *BenchWriteOptions) setDefaults() {
	if o.Senders == 0 {
		o.Senders = 50
	}
	if o.Topics == 0 {
		o.Topics = 100
	}
	if o.FirstGroupID == 0 {
		o.FirstGroupID = 1
	}
	if o.Count == 0 && o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.ContentBytes == 0 {
		o.ContentBytes = 100
	}
	if o.RunID == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		o.RunID = hex.EncodeToString(b)
	}
}

// Validate reports every invalid option after defaults are applied.
func (o BenchWriteOptions) Validate() error {
	var errs []error
	if o.Tenant.IsZero() {
		errs = append(errs, errors.New("tenant is required"))
	}
	if o.Senders <= 0 || o.Topics <= 0 || o.FirstGroupID <= 0 || o.ContentBytes <= 0 {
		errs = append(errs, errors.New("senders, topics, first group id and content bytes must be positive"))
	}
	if o.Count < 0 || o.Duration < 0 {
		errs = append(errs, errors.New("count and duration must not be negative"))
	}
	if (o.Alternate == nil) != (o.Slice <= 0) {
		errs = append(errs, errors.New("alternate and slice go together"))
	} else if o.Alternate != nil && (o.Count != 0 || o.Duration <= 0 || o.Duration%(4*o.Slice) != 0) {
		errs = append(errs, errors.New("an alternating run needs a Duration of whole rounds of four slices and no Count"))
	}
	if _, err := domain.NewClientMsgID(o.RunID + "-99999-9999999999"); err != nil {
		errs = append(errs, fmt.Errorf("RunID: %w", err))
	}
	return errors.Join(errs...)
}

// BenchWrite sends text messages through h from opts.Senders goroutines and measures throughput
// and latency. It fails only for bad options; send failures are counted. It stops early when ctx
// ends.
func BenchWrite(ctx context.Context, h MessageSender, opts BenchWriteOptions) (BenchWriteResult, error) {
	opts.setDefaults()
	if err := opts.Validate(); err != nil {
		return BenchWriteResult{}, fmt.Errorf("bench write: %w", err)
	}
	run := &benchRun{h: h, opts: opts, all: newLatencyHistogram()}
	run.topics = make([]domain.Topic, opts.Topics)
	for i := range run.topics {
		t, err := domain.GroupTopic(opts.FirstGroupID + int64(i))
		if err != nil {
			return BenchWriteResult{}, fmt.Errorf("bench write: %w", err)
		}
		run.topics[i] = t
	}
	var err error
	if run.content, err = domain.TextContent(strings.Repeat("x", opts.ContentBytes), 0); err != nil {
		return BenchWriteResult{}, fmt.Errorf("bench write: %w", err)
	}
	start := time.Now()
	run.start, run.deadline = start, start.Add(opts.Duration)
	if opts.Alternate != nil {
		run.start = start.Add(opts.Slice) // after the warm-up
		run.deadline = run.start.Add(opts.Duration)
	}
	var wg sync.WaitGroup
	for s := range opts.Senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run.sender(ctx, s)
		}()
	}
	wg.Wait()
	res := BenchWriteResult{
		Sends:   run.sends.Load(),
		Errors:  run.failures.Load(),
		Elapsed: time.Since(start),
		P50:     time.Duration(run.all.ValueAtQuantile(50)) * time.Microsecond,
		P99:     time.Duration(run.all.ValueAtQuantile(99)) * time.Microsecond,
		Max:     time.Duration(run.all.Max()) * time.Microsecond,
	}
	if p := run.firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	res.SendsPerSec = float64(res.Sends) / res.Elapsed.Seconds()
	if opts.Alternate != nil {
		res.SlicesPerRun = int(opts.Duration / opts.Slice)
		for i := range res.SliceSends {
			res.SliceSends[i] = run.slices[i].Load()
			res.SliceRates[i] = float64(res.SliceSends[i]) / (opts.Duration / 2).Seconds()
		}
	}
	return res, nil
}

// benchRun is the shared state of one BenchWrite.
type benchRun struct {
	h        MessageSender
	opts     BenchWriteOptions
	topics   []domain.Topic
	content  domain.Content
	start    time.Time
	deadline time.Time

	claimed  atomic.Int64 // sends started, against opts.Count
	sends    atomic.Int64
	failures atomic.Int64
	firstErr atomic.Pointer[error]
	slices   [2]atomic.Int64 // successful sends by the sender of their slice (alternating runs)
	mu       sync.Mutex      // guards all
	all      *hdrhistogram.Histogram
}

// newLatencyHistogram records microseconds from 1 µs to a minute with 3 significant digits.
func newLatencyHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
}

// more reports whether another send should start.
func (r *benchRun) more(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	if r.opts.Count > 0 {
		return r.claimed.Add(1) <= int64(r.opts.Count)
	}
	return time.Now().Before(r.deadline)
}

// sender is one sender's loop: user s+1 cycling through the topics.
func (r *benchRun) sender(ctx context.Context, s int) {
	hist := newLatencyHistogram()
	cmd := message.SendMessage{Tenant: r.opts.Tenant, From: domain.UserID(s + 1), MsgType: domain.MsgText, Content: r.content}
	for n := 0; r.more(ctx); n++ {
		cmd.Topic = r.topics[(s+n)%len(r.topics)]
		cmd.ClientMsgID, _ = domain.NewClientMsgID(r.opts.RunID + "-" + strconv.Itoa(s) + "-" + strconv.Itoa(n))
		t0 := time.Now()
		h, slice := r.h, 0
		if r.opts.Alternate != nil {
			slice = -1 // warm-up
			if t := t0.Sub(r.start); t >= 0 {
				slice = int((t/r.opts.Slice+1)/2) % 2 // ABBA
			}
			if slice == 1 {
				h = r.opts.Alternate
			}
		}
		if _, err := h.Handle(ctx, cmd); err != nil {
			r.failures.Add(1)
			r.firstErr.CompareAndSwap(nil, &err)
			continue
		}
		_ = hist.RecordValue(time.Since(t0).Microseconds())
		r.sends.Add(1)
		if slice >= 0 {
			r.slices[slice].Add(1)
		}
	}
	r.mu.Lock()
	r.all.Merge(hist)
	r.mu.Unlock()
}
