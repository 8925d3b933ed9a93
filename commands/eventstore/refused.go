package eventstore

import (
	"errors"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/pgerr"
)

// Refused reports whether err, from a write, says the data itself was refused: the store found
// an envelope invalid (domain.ErrInvalid), or PostgreSQL raised a data exception (SQLSTATE class
// 22: text or JSON it cannot store, a value out of range). Writing the same data again fails the
// same way; a transient failure (domain.ErrRetryable) is never Refused.
func Refused(err error) bool {
	if err == nil || errors.Is(err, domain.ErrRetryable) {
		return false
	}
	if errors.Is(err, domain.ErrInvalid) {
		return true
	}
	return pgerr.Class(err, "22")
}
