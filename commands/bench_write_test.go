package commands_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/imledger/imledger/bench/writebench"
	"github.com/imledger/imledger/commands"
)

func TestBenchWriteCountsAndMeasures(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, commands.SendMessageConfig{})
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
