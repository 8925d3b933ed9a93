package coalesce_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/internal/coalesce"
)

type call struct {
	n     int
	round int // the answer: which round ran it
}

// recorder is a Group whose rounds are recorded and whose first round blocks until released.
type recorder struct {
	g       coalesce.Group[*call]
	mu      sync.Mutex
	rounds  [][]int
	started chan struct{}
	release chan struct{}
}

func newRecorder() *recorder {
	r := &recorder{started: make(chan struct{}, 16), release: make(chan struct{})}
	r.g.Run = func(_ context.Context, round []*call) {
		r.mu.Lock()
		r.rounds = append(r.rounds, nil)
		i := len(r.rounds) - 1
		for _, c := range round {
			r.rounds[i] = append(r.rounds[i], c.n)
			c.round = i
		}
		r.mu.Unlock()
		r.started <- struct{}{}
		if i == 0 {
			<-r.release
		}
	}
	return r
}

// TestCallsArrivingDuringARoundGoTogetherInTheNext: the first call runs at once, alone; the
// calls made while it runs are one round after it; the first caller returns after its own round.
func TestCallsArrivingDuringARoundGoTogetherInTheNext(t *testing.T) {
	r := newRecorder()
	first := &call{n: 0}
	firstDone := make(chan struct{})
	go func() { _ = r.g.Do(context.Background(), first); close(firstDone) }()
	<-r.started
	var wg sync.WaitGroup
	calls := make([]*call, 5)
	for i := range calls {
		calls[i] = &call{n: i + 1}
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.g.Do(context.Background(), calls[i]) }()
	}
	// Let them queue behind the blocked round.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && r.g.Queued() < 5 {
		time.Sleep(time.Millisecond)
	}
	close(r.release)
	<-firstDone
	wg.Wait()
	if len(r.rounds) != 2 || len(r.rounds[0]) != 1 || len(r.rounds[1]) != 5 {
		t.Fatalf("rounds %v, want [[0] [the five others]]", r.rounds)
	}
	for _, c := range calls {
		if c.round != 1 {
			t.Errorf("call %d ran in round %d, want 1", c.n, c.round)
		}
	}
	// Idle again: the next call runs at once, alone.
	last := &call{n: 9}
	_ = r.g.Do(context.Background(), last)
	if len(r.rounds) != 3 || len(r.rounds[2]) != 1 {
		t.Fatalf("rounds %v: a call to an idle group did not run alone", r.rounds)
	}
}

// TestAdmitHoldsCallsForALaterRound: calls Admit refuses wait for the next round, in order.
func TestAdmitHoldsCallsForALaterRound(t *testing.T) {
	r := newRecorder()
	r.g.Admit = func() func(*call) bool {
		odd := 0
		return func(c *call) bool {
			if c.n%2 == 1 {
				odd++
				return odd == 1 // one odd call a round
			}
			return true
		}
	}
	go func() { _ = r.g.Do(context.Background(), &call{n: 0}) }()
	<-r.started
	var wg sync.WaitGroup
	for _, n := range []int{1, 2, 3, 4, 5} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.g.Do(context.Background(), &call{n: n}) }()
		for r.g.Queued() < n { // queue them in order
			time.Sleep(time.Millisecond)
		}
	}
	close(r.release)
	wg.Wait()
	want := [][]int{{0}, {1, 2, 4}, {3}, {5}}
	if len(r.rounds) != len(want) {
		t.Fatalf("rounds %v, want %v", r.rounds, want)
	}
	for i := range want {
		if len(r.rounds[i]) != len(want[i]) {
			t.Fatalf("rounds %v, want %v", r.rounds, want)
		}
		for j := range want[i] {
			if r.rounds[i][j] != want[i][j] {
				t.Fatalf("rounds %v, want %v", r.rounds, want)
			}
		}
	}
}

// TestARoundHasItsCallsLatestDeadlineAndNoneOfTheirCancellations: a caller cancelled while its
// round runs does not cancel the round (the other calls in it would fail); the round may run as
// long as the latest deadline of its calls, and without one when a call has none.
func TestARoundHasItsCallsLatestDeadlineAndNoneOfTheirCancellations(t *testing.T) {
	r := newRecorder()
	type seen struct {
		err      error
		deadline time.Time
		has      bool
	}
	var rounds []seen
	run := r.g.Run
	r.g.Run = func(ctx context.Context, round []*call) {
		d, ok := ctx.Deadline()
		rounds = append(rounds, seen{ctx.Err(), d, ok})
		run(ctx, round)
	}
	cancelled, cancel := context.WithTimeout(context.Background(), time.Hour)
	cancel()
	go func() { _ = r.g.Do(cancelled, &call{n: 0}) }()
	<-r.started
	soon, cancelSoon := context.WithTimeout(context.Background(), time.Minute)
	defer cancelSoon()
	later, cancelLater := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancelLater()
	var wg sync.WaitGroup
	for i, ctx := range []context.Context{soon, later} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.g.Do(ctx, &call{n: i + 1}) }()
	}
	for r.g.Queued() < 2 {
		time.Sleep(time.Millisecond)
	}
	close(r.release)
	wg.Wait()
	_ = r.g.Do(context.Background(), &call{n: 3}) // no deadline
	if len(rounds) != 3 {
		t.Fatalf("%d rounds, want 3", len(rounds))
	}
	if rounds[0].err != nil || !rounds[0].has {
		t.Errorf("round of a cancelled caller: err %v, deadline %v; want running with the caller's deadline", rounds[0].err, rounds[0].has)
	}
	if d := time.Until(rounds[1].deadline); !rounds[1].has || d < 110*time.Minute {
		t.Errorf("round of calls due in 1 min and 2 h: deadline in %s, want the latest (2 h)", d.Round(time.Minute))
	}
	if rounds[2].has {
		t.Errorf("round of a call without a deadline has one: %v", rounds[2].deadline)
	}
}

// TestAPanickingRoundFailsItsCallsAndTheGroupGoesOn: a panic in Run is every call's error in
// that round, and the next call runs.
func TestAPanickingRoundFailsItsCallsAndTheGroupGoesOn(t *testing.T) {
	var g coalesce.Group[*call]
	g.Run = func(_ context.Context, round []*call) {
		if round[0].n == 0 {
			panic("boom")
		}
		for _, c := range round {
			c.round = 7
		}
	}
	err := g.Do(context.Background(), &call{n: 0})
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Do of a panicking round: %v, want the panic as an error", err)
	}
	c := &call{n: 1}
	if err := g.Do(context.Background(), c); err != nil || c.round != 7 {
		t.Fatalf("the call after a panic: %v, ran %v", err, c.round == 7)
	}
}
