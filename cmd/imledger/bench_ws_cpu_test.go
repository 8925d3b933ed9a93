package main

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestStorePIDChargesAProcessTree: with a root pid, a store is charged with that process and its
// descendants only (a child's CPU included), not with every process of the store's name.
func TestStorePIDChargesAProcessTree(t *testing.T) {
	t.Parallel()
	// A child that burns CPU for a moment, started by this process: it descends from os.Getpid().
	burn := exec.Command("sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 5")
	if err := burn.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = burn.Process.Kill(); _ = burn.Wait() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, bt, err := procCPU(burn.Process.Pid)
		if err == nil && bt.own >= 0.05 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child used no CPU (%v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, own, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	tree := sampleCPU(0, "server", map[string]int{"redis": os.Getpid()})
	if tree["redis"] < own.own+0.05 {
		t.Errorf("store charged with the tree of this process: %.2f s, want at least this process's %.2f s and the child's", tree["redis"], own.own)
	}
	other := sampleCPU(0, "server", map[string]int{"redis": burn.Process.Pid})
	if other["redis"] >= tree["redis"] || other["redis"] < 0.05 {
		t.Errorf("store charged with the child's tree alone: %.2f s, want its own CPU and less than the whole tree's %.2f s", other["redis"], tree["redis"])
	}
}
