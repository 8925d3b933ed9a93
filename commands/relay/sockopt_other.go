//go:build !linux

package relay

import (
	"syscall"
	"time"
)

// userTimeoutControl does nothing where TCP_USER_TIMEOUT does not exist; keepalives and the
// lock pings still bound how long a dead connection goes unnoticed.
func userTimeoutControl(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
