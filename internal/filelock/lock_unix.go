//go:build unix

package filelock

import (
	"fmt"
	"os"
	"syscall"
)

// TryLock takes an exclusive advisory lock on path (created with perm if missing) without
// waiting: an error wrapping ErrLocked when another holder has it. The lock ends with the
// returned function or with the process.
func TryLock(path string, perm os.FileMode) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, perm)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w (%w)", path, ErrLocked, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
