//go:build unix

package ws

import (
	"math"
	"syscall"
	"testing"
)

// The default connection limit leaves ReservedFiles of the open-file limit to the node itself.
func TestDefaultMaxConnectionsFollowsTheFileLimit(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	want := -1 // unlimited
	if rl.Cur <= math.MaxInt32 {
		want = max(int(rl.Cur)-ReservedFiles, 1)
	}
	var c Config
	c.setDefaults()
	if c.MaxConnections != want {
		t.Errorf("default max_connections = %d with an open-file limit of %d, want %d", c.MaxConnections, rl.Cur, want)
	}
	if err := (Config{MaxConnections: -1}).Validate(); err != nil {
		t.Errorf("max_connections -1 (no limit) rejected: %v", err)
	}
}
