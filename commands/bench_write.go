package commands

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

	"github.com/imledger/imledger/domain"
)

// MessageSender is anything that handles SendMessage; *SendMessageHandler is one.
type MessageSender interface {
	Handle(ctx context.Context, cmd SendMessage) (SendResult, error)
}

var _ MessageSender = (*SendMessageHandler)(nil)

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
	// RunID prefixes every client_msg_id so runs never collide. Default: random.
	RunID string
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
		errs = append(errs, errors.New("Tenant is required"))
	}
	if o.Senders <= 0 || o.Topics <= 0 || o.FirstGroupID <= 0 || o.ContentBytes <= 0 {
		errs = append(errs, errors.New("Senders, Topics, FirstGroupID and ContentBytes must be positive"))
	}
	if o.Count < 0 || o.Duration < 0 {
		errs = append(errs, errors.New("Count and Duration must not be negative"))
	}
	if _, err := domain.NewClientMsgID(o.RunID + "-0-0"); err != nil {
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
	topics := make([]domain.Topic, opts.Topics)
	for i := range topics {
		t, err := domain.GroupTopic(opts.FirstGroupID + int64(i))
		if err != nil {
			return BenchWriteResult{}, fmt.Errorf("bench write: %w", err)
		}
		topics[i] = t
	}
	content, err := domain.TextContent(strings.Repeat("x", opts.ContentBytes), 0)
	if err != nil {
		return BenchWriteResult{}, fmt.Errorf("bench write: %w", err)
	}
	var (
		budget   = int64(opts.Count)
		claimed  atomic.Int64
		sends    atomic.Int64
		failures atomic.Int64
		firstErr atomic.Pointer[error]
		mu       sync.Mutex
		all      = hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
		wg       sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(opts.Duration)
	more := func() bool {
		if ctx.Err() != nil {
			return false
		}
		if budget > 0 {
			return claimed.Add(1) <= budget
		}
		return time.Now().Before(deadline)
	}
	for s := range opts.Senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hist := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
			cmd := SendMessage{Tenant: opts.Tenant, From: domain.UserID(s + 1), MsgType: domain.MsgText, Content: content}
			for n := 0; more(); n++ {
				cmd.Topic = topics[(s+n)%len(topics)]
				cmd.ClientMsgID, _ = domain.NewClientMsgID(opts.RunID + "-" + strconv.Itoa(s) + "-" + strconv.Itoa(n))
				t0 := time.Now()
				_, err := h.Handle(ctx, cmd)
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				_ = hist.RecordValue(time.Since(t0).Microseconds())
				sends.Add(1)
			}
			mu.Lock()
			all.Merge(hist)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res := BenchWriteResult{
		Sends:   sends.Load(),
		Errors:  failures.Load(),
		Elapsed: time.Since(start),
		P50:     time.Duration(all.ValueAtQuantile(50)) * time.Microsecond,
		P99:     time.Duration(all.ValueAtQuantile(99)) * time.Microsecond,
		Max:     time.Duration(all.Max()) * time.Microsecond,
	}
	if p := firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	res.SendsPerSec = float64(res.Sends) / res.Elapsed.Seconds()
	return res, nil
}
