// Package filelock takes exclusive advisory locks on files (flock), so two processes never
// write the same directory or output at once: the embedded broker's data directory, an
// export's output.
package filelock

import "errors"

// ErrLocked is the error of TryLock when another holder has the lock.
var ErrLocked = errors.New("locked by another process")
