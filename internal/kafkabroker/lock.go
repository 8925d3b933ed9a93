package kafkabroker

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/imledger/imledger/internal/filelock"
)

// lockDir takes an exclusive advisory lock on dir/.lock, failing at once if another process (or
// broker) holds it; the lock ends with the returned function or the process.
func lockDir(dir string) (func(), error) {
	unlock, err := filelock.TryLock(filepath.Join(dir, ".lock"), 0o600)
	switch {
	case errors.Is(err, filelock.ErrLocked):
		return nil, fmt.Errorf("kafkabroker: data dir %s is in use by another broker: %w", dir, err)
	case err != nil:
		return nil, fmt.Errorf("kafkabroker: lock data dir: %w", err)
	}
	return unlock, nil
}
