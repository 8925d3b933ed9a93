package ws

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func roundWorkers() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "ws.(*rounds).worker")
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
		for r.started.Load() == 1 && !waiting(r) && time.Now().Before(deadline) {
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
	for roundWorkers() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := roundWorkers(); n != 0 {
		t.Fatalf("%d round goroutines left after the gateway stopped", n)
	}
}

// waiting reports whether a round goroutine waits for work.
func waiting(r *rounds) bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "ws.(*rounds).worker") && strings.Contains(g, "[select") {
			return true
		}
	}
	return false
}
