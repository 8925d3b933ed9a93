package adminclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/imledger/imledger/domain"
)

// BenchOptions configure Bench. With Pairs set it runs closed-loop: Concurrency workers each send
// a user.ban and then a user.unban of one user and wait for both results before the next pair.
// With Pairs 0 it runs open-loop: Rate commands per second for Duration, whatever the answers,
// alternating user.ban and user.unban over Users users so each user's commands are a Users/Rate
// apart.
type BenchOptions struct {
	Tenant      string
	Pairs       int
	Concurrency int
	Rate        float64
	Duration    time.Duration
	Users       int
	FirstUser   int64
	// Timeout is how long a command waits for its result before it counts as timed out.
	Timeout time.Duration
}

// BenchResult is what Bench measured: answers by status and the latency from producing a
// command to receiving its result.
type BenchResult struct {
	Mode                                    string
	Sent, Succeeded, Rejected, Failed, Lost int
	Reasons                                 map[string]int
	Elapsed                                 time.Duration
	P50, P99, Max                           time.Duration
}

// PerSecond is the rate of succeeded commands.
func (r BenchResult) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Succeeded) / r.Elapsed.Seconds()
}

// Print writes the result for a person.
func (r BenchResult) Print(w io.Writer) {
	fmt.Fprintf(w, "bench admin (%s): %d commands in %s: %.0f succeeded/s\n", r.Mode, r.Sent, r.Elapsed.Round(time.Millisecond), r.PerSecond())
	fmt.Fprintf(w, "  succeeded %d, rejected %d, failed %d, no result %d\n", r.Succeeded, r.Rejected, r.Failed, r.Lost)
	keys := make([]string, 0, len(r.Reasons))
	for k := range r.Reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  reason %s: %d\n", k, r.Reasons[k])
	}
	fmt.Fprintf(w, "  produce->result latency: p50 %s, p99 %s, max %s\n", r.P50.Round(10*time.Microsecond),
		r.P99.Round(10*time.Microsecond), r.Max.Round(10*time.Microsecond))
}

// benchRun collects the answers of one run.
type benchRun struct {
	mu   sync.Mutex
	res  BenchResult
	hist *hdrhistogram.Histogram
}

func (b *benchRun) record(r domain.AdminResult, err error, took time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.res.Sent++
	switch {
	case err != nil:
		b.res.Lost++
		b.res.Reasons["error: "+shortErr(err)]++
		return
	case r.Status == domain.AdminSucceeded:
		b.res.Succeeded++
	case r.Status == domain.AdminRejected:
		b.res.Rejected++
		b.res.Reasons[r.Reason]++
	default:
		b.res.Failed++
		b.res.Reasons[r.Reason]++
	}
	_ = b.hist.RecordValue(took.Microseconds())
}

func shortErr(err error) string {
	if errors.Is(err, ErrTimeout) {
		return "timeout"
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// Bench runs the admin benchmark with c against the tenant of o, which must exist.
func Bench(ctx context.Context, c *Client, o BenchOptions) (BenchResult, error) {
	if o.Tenant == "" {
		return BenchResult{}, errors.New("bench admin: a tenant is required")
	}
	if o.Users <= 0 {
		o.Users = 1000
	}
	if o.FirstUser <= 0 {
		o.FirstUser = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	run := &benchRun{hist: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3), res: BenchResult{Reasons: map[string]int{}}}
	start := time.Now()
	var err error
	if o.Pairs > 0 {
		run.res.Mode = "closed loop"
		err = benchPairs(ctx, c, o, run)
	} else {
		run.res.Mode = fmt.Sprintf("open loop at %.0f/s", o.Rate)
		err = benchRate(ctx, c, o, run)
	}
	run.res.Elapsed = time.Since(start)
	run.res.P50 = time.Duration(run.hist.ValueAtQuantile(50)) * time.Microsecond
	run.res.P99 = time.Duration(run.hist.ValueAtQuantile(99)) * time.Microsecond
	run.res.Max = time.Duration(run.hist.Max()) * time.Microsecond
	return run.res, err
}

// send produces one command and records its answer.
func benchSend(ctx context.Context, c *Client, o BenchOptions, typ domain.AdminCommandType, user int64, run *benchRun) {
	cmd, err := c.NewCommand(o.Tenant, typ, map[string]string{"user_id": strconv.FormatInt(user, 10), "reason": "bench"})
	if err != nil {
		run.record(domain.AdminResult{}, err, 0)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	t0 := time.Now()
	r, err := c.Send(ctx, cmd)
	run.record(r, err, time.Since(t0))
}

func benchPairs(ctx context.Context, c *Client, o BenchOptions, run *benchRun) error {
	if o.Concurrency <= 0 {
		o.Concurrency = 64
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				user := o.FirstUser + int64(i%o.Users)
				benchSend(ctx, c, o, domain.CmdUserBan, user, run)
				benchSend(ctx, c, o, domain.CmdUserUnban, user, run)
			}
		}()
	}
	for i := 0; i < o.Pairs && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return ctx.Err()
}

func benchRate(ctx context.Context, c *Client, o BenchOptions, run *benchRun) error {
	if o.Rate <= 0 || o.Duration <= 0 {
		return errors.New("bench admin: open loop needs a rate and a duration")
	}
	interval := time.Duration(float64(time.Second) / o.Rate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	deadline := time.Now().Add(o.Duration)
	var wg sync.WaitGroup
	for i := 0; time.Now().Before(deadline); i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		case <-tick.C:
		}
		typ := domain.CmdUserBan
		if (i/o.Users)%2 == 1 {
			typ = domain.CmdUserUnban
		}
		user := o.FirstUser + int64(i%o.Users)
		wg.Add(1)
		go func() {
			defer wg.Done()
			benchSend(ctx, c, o, typ, user, run)
		}()
	}
	wg.Wait()
	return nil
}
