package readmodels

import (
	"fmt"

	"github.com/google/uuid"
)

// EventError says which event of a batch a read model could not apply. A projector parks such
// an event instead of retrying it; each store documents what Err wraps.
type EventError struct {
	Index   int       // position in the batch
	EventID uuid.UUID // the event's id
	Err     error
}

func (e *EventError) Error() string {
	return fmt.Sprintf("event %d (%s): %v", e.Index, e.EventID, e.Err)
}

// Unwrap returns the cause.
func (e *EventError) Unwrap() error { return e.Err }
