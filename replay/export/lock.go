package export

import (
	"errors"
	"fmt"

	"github.com/imledger/imledger/internal/filelock"
)

// lockOutput takes an exclusive advisory lock on path (created if missing), failing at once if
// another export holds it; the lock ends with the returned function or the process.
func lockOutput(path, out string) (func(), error) {
	unlock, err := filelock.TryLock(path, 0o644)
	switch {
	case errors.Is(err, filelock.ErrLocked):
		return nil, fmt.Errorf("export: %s is being written by another export (%s is locked): %w", out, path, err)
	case err != nil:
		return nil, fmt.Errorf("export: lock %s: %w", out, err)
	}
	return unlock, nil
}
