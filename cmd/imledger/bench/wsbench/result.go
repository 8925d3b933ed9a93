package wsbench

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency summarizes a latency histogram.
type Latency struct {
	Count int64
	P50   time.Duration
	P99   time.Duration
	Max   time.Duration
}

func summarize(h *hdrhistogram.Histogram) Latency {
	us := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	return Latency{Count: h.TotalCount(), P50: us(h.ValueAtQuantile(50)), P99: us(h.ValueAtQuantile(99)), Max: us(h.Max())}
}

// Result is what a Run measured. Rates are per second of the sending window (Duration);
// acks and deliveries that arrive during the drain count too.
type Result struct {
	Clients  int
	Groups   int
	Senders  int
	Rate     float64 // the target total rate; 0: unpaced
	InFlight int     // pubs in flight per sender; 0: unbounded
	Idle     bool    // clients only held their connections
	Duration time.Duration

	Setup time.Duration // dialling, logging in and subscribing every client
	Held  int64         // connections still open when the window ended

	Sent      int64 // pub frames written
	Acked     int64 // pubs answered 202
	Delivered int64 // data frames of other clients' messages received
	// Expected is the deliveries the acked messages should have produced: each acked message
	// once to every other client of its group.
	Expected int64
	// Errors counts pubs answered with an error ctrl, by reason, plus "connection" for clients
	// that lost their connection, "no_ack" for pubs never answered and "content_mismatch" for
	// deliveries whose content was not byte for byte what the sender wrote.
	Errors map[string]int64

	Ack     Latency // pub written -> its ack received
	Deliver Latency // timestamp in the content -> data frame received by another client
}

// ErrorCount is the sum of Errors.
func (r Result) ErrorCount() int64 {
	var n int64
	for _, v := range r.Errors {
		n += v
	}
	return n
}

// Print writes a human-readable report.
func (r Result) Print(w io.Writer) error {
	secs := r.Duration.Seconds()
	perSec := func(n int64) float64 {
		if secs == 0 {
			return 0
		}
		return float64(n) / secs
	}
	var b strings.Builder
	if r.Idle {
		fmt.Fprintf(&b, "clients %d, groups %d, idle for %s\n", r.Clients, r.Groups, r.Duration)
		fmt.Fprintf(&b, "set up     %10d clients in %s\n", r.Clients, round(r.Setup))
		fmt.Fprintf(&b, "held       %10d at the end\n", r.Held)
		r.printErrors(&b)
		_, err := io.WriteString(w, b.String())
		return err
	}
	rate := fmt.Sprintf("target %.0f msg/s", r.Rate)
	if r.Rate == 0 {
		rate = "unpaced"
	}
	if r.InFlight > 0 {
		rate += fmt.Sprintf(", at most %d in flight per sender", r.InFlight)
	}
	fmt.Fprintf(&b, "clients %d, groups %d, senders %d, %s, for %s (set up in %s)\n",
		r.Clients, r.Groups, r.Senders, rate, r.Duration, round(r.Setup))
	fmt.Fprintf(&b, "sent       %10d  %10.1f/s\n", r.Sent, perSec(r.Sent))
	fmt.Fprintf(&b, "acked      %10d  %10.1f/s\n", r.Acked, perSec(r.Acked))
	fmt.Fprintf(&b, "delivered  %10d  %10.1f/s  (expected %d)\n", r.Delivered, perSec(r.Delivered), r.Expected)
	r.printErrors(&b)
	for _, l := range []struct {
		name string
		v    Latency
	}{{"ack latency", r.Ack}, {"send->deliver", r.Deliver}} {
		fmt.Fprintf(&b, "%-14s p50 %9s  p99 %9s  max %9s  (n=%d)\n", l.name, round(l.v.P50), round(l.v.P99), round(l.v.Max), l.v.Count)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (r Result) printErrors(b *strings.Builder) {
	fmt.Fprintf(b, "errors     %10d", r.ErrorCount())
	if len(r.Errors) > 0 {
		reasons := make([]string, 0, len(r.Errors))
		for k, v := range r.Errors {
			reasons = append(reasons, fmt.Sprintf("%s: %d", k, v))
		}
		sort.Strings(reasons)
		fmt.Fprintf(b, "  (%s)", strings.Join(reasons, ", "))
	}
	b.WriteString("\n")
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
