package coalesce_test

import (
	"context"
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
	go func() { r.g.Do(context.Background(), first); close(firstDone) }()
	<-r.started
	var wg sync.WaitGroup
	calls := make([]*call, 5)
	for i := range calls {
		calls[i] = &call{n: i + 1}
		wg.Add(1)
		go func() { defer wg.Done(); r.g.Do(context.Background(), calls[i]) }()
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
	r.g.Do(context.Background(), last)
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
	go r.g.Do(context.Background(), &call{n: 0})
	<-r.started
	var wg sync.WaitGroup
	for _, n := range []int{1, 2, 3, 4, 5} {
		wg.Add(1)
		go func() { defer wg.Done(); r.g.Do(context.Background(), &call{n: n}) }()
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

// TestTheRoundKeepsTheDeadlineButNotTheCancellationOfItsCaller: a caller cancelled while its
// round runs does not cancel the round (the other calls in it would fail).
func TestTheRoundKeepsTheDeadlineButNotTheCancellationOfItsCaller(t *testing.T) {
	var g coalesce.Group[*call]
	var (
		errInRound error
		deadline   time.Time
		hasOne     bool
	)
	g.Run = func(ctx context.Context, _ []*call) {
		errInRound = ctx.Err()
		deadline, hasOne = ctx.Deadline()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	cancel()
	g.Do(ctx, &call{})
	if errInRound != nil {
		t.Fatalf("the round's context is cancelled with its caller's: %v", errInRound)
	}
	if !hasOne || time.Until(deadline) > time.Hour {
		t.Fatalf("the round's context lost its caller's deadline: %v %v", deadline, hasOne)
	}
}
