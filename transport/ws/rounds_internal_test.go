package ws

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// roundWorkers counts the process's round goroutines, and those of them waiting for a round.
func roundWorkers() (all, waiting int) {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "ws.(*rounds).worker") {
			all++
			if strings.Contains(g, "[select") {
				waiting++
			}
		}
	}
	return all, waiting
}

// Rounds that follow one another run on one goroutine; rounds at once each get one; every
// round runs; the goroutines end when the gateway stops.
//
// Not parallel: it counts the process's round goroutines.
func TestRoundsReuseTheirGoroutines(t *testing.T) {
	stop := make(chan struct{})
	r := newRounds(stop)
	ran := 0
	for range 100 {
		done := make(chan struct{})
		r.run(func() { ran++; close(done) })
		<-done
		// The worker waits for the next round only once this one has returned.
		deadline := time.Now().Add(5 * time.Second)
		for r.started.Load() == 1 && !roundWaiting() && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	if ran != 100 {
		t.Fatalf("%d rounds ran, want 100", ran)
	}
	if n := r.started.Load(); n != 1 {
		t.Errorf("100 rounds one after another started %d goroutines, want 1", n)
	}

	const at = 10
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Add(at)
	for range at {
		r.run(func() { defer wg.Done(); <-release })
	}
	close(release)
	wg.Wait()
	if n := r.started.Load(); n < at || n > at+1 {
		t.Errorf("%d rounds at once started %d goroutines in all, want %d or %d", at, n, at, at+1)
	}
	close(stop)
	deadline := time.Now().Add(5 * time.Second)
	for n, _ := roundWorkers(); n > 0 && time.Now().Before(deadline); n, _ = roundWorkers() {
		time.Sleep(10 * time.Millisecond)
	}
	if n, _ := roundWorkers(); n != 0 {
		t.Fatalf("%d round goroutines left after the gateway stopped", n)
	}
}

func roundWaiting() bool { _, w := roundWorkers(); return w > 0 }
