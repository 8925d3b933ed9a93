package message_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imledger/imledger/cmd/imledger/bench/writebench"
	"github.com/imledger/imledger/commands/message"
)

func TestBenchWriteCountsAndMeasures(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	const count = 2000
	res, err := writebench.BenchWrite(testCtx(t), e.h, writebench.BenchWriteOptions{Tenant: e.tenant, Senders: 20, Topics: 7, Count: count})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	if res.Sends != count || res.Errors != 0 || res.FirstError != nil {
		t.Fatalf("result %s; want %d sends, no errors", res, count)
	}
	if res.P50 <= 0 || res.P50 > res.P99 || res.P99 > res.Max || res.Max > res.Elapsed || res.SendsPerSec <= 0 {
		t.Errorf("inconsistent latencies or rate: %s", res)
	}
	if n := e.countEvents(t); n != count {
		t.Errorf("%d events stored, want %d", n, count)
	}
	for g := 1; g <= 7; g++ {
		events := e.stream(t, fmt.Sprintf("grp%d", g))
		for i, ev := range events {
			if ev.StreamVersion != int64(i+1) {
				t.Fatalf("grp%d: seq %d at index %d", g, ev.StreamVersion, i)
			}
		}
	}

	// A timed run stops by itself.
	res, err = writebench.BenchWrite(testCtx(t), e.h, writebench.BenchWriteOptions{Tenant: e.tenant, Senders: 5, Topics: 2, FirstGroupID: 100, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Sends == 0 || res.Errors != 0 || res.Elapsed > 5*time.Second {
		t.Errorf("timed run: %s", res)
	}

	if _, err := writebench.BenchWrite(testCtx(t), e.h, writebench.BenchWriteOptions{}); err == nil {
		t.Error("BenchWrite without a tenant did not fail")
	}
}

// counting passes sends on and counts the successful ones.
type counting struct {
	next writebench.MessageSender
	n    atomic.Int64
}

func (c *counting) Handle(ctx context.Context, cmd message.SendMessage) (message.SendResult, error) {
	r, err := c.next.Handle(ctx, cmd)
	if err == nil {
		c.n.Add(1)
	}
	return r, err
}

// TestBenchWriteAlternates: an alternating run warms up through the first sender, then sends
// through both, each in its own slices, and reports each one's sends.
func TestBenchWriteAlternates(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	a, b := &counting{next: e.h}, &counting{next: e.h}
	// Slices of 250 ms: under the race detector on a saturated machine one send can take a
	// quarter of a second, and a slice shorter than a send may start none.
	opts := writebench.BenchWriteOptions{Tenant: e.tenant, Senders: 8, Topics: 3, FirstGroupID: 300,
		Duration: time.Second, Alternate: b, Slice: 250 * time.Millisecond}
	res, err := writebench.BenchWrite(testCtx(t), a, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.SlicesPerRun != 4 || res.Errors != 0 {
		t.Fatalf("result %s, %d slices", res, res.SlicesPerRun)
	}
	if res.SliceSends[0] >= a.n.Load() || res.SliceSends[1] != b.n.Load() || res.SliceSends[0] == 0 || b.n.Load() == 0 ||
		a.n.Load()+b.n.Load() != res.Sends || res.Elapsed < 1250*time.Millisecond {
		t.Fatalf("slice sends %v, sent through the first %d (warm-up included) and the alternate %d, %d in all, in %v",
			res.SliceSends, a.n.Load(), b.n.Load(), res.Sends, res.Elapsed)
	}
	if res.SliceRates[1] != float64(res.SliceSends[1])/0.5 {
		t.Errorf("the alternate's rate %v is not its sends over half the duration", res.SliceRates[1])
	}
	for _, bad := range []writebench.BenchWriteOptions{
		{Tenant: e.tenant, Duration: time.Second, Alternate: b},                                // no slice
		{Tenant: e.tenant, Count: 10, Alternate: b, Slice: time.Second},                        // a count
		{Tenant: e.tenant, Duration: 300 * time.Millisecond, Alternate: b, Slice: time.Second}, // not whole pairs
	} {
		if _, err := writebench.BenchWrite(testCtx(t), a, bad); err == nil {
			t.Errorf("options %+v were accepted", bad)
		}
	}
}
