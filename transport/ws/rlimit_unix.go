//go:build unix

package ws

import (
	"math"
	"syscall"
)

// openFileLimit returns the soft limit on open files (RLIMIT_NOFILE); ok is false when it is
// unlimited (or too large to be one) or cannot be read.
func openFileLimit() (n int, ok bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > math.MaxInt32 {
		return 0, false
	}
	return int(rl.Cur), true
}
