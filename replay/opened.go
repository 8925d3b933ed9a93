package replay

import (
	"context"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
)

// OpenedEvents returns r with every event it reads opened as projections.Opened opens the live
// projections' events (DESIGN §7a): rebuilds and verification see what the live projections saw.
// o nil returns r as it is.
func OpenedEvents(r EventReader, o domain.Opener) EventReader {
	if o == nil {
		return r
	}
	return openingReader{EventReader: r, o: o}
}

// openingReader opens what its EventReader reads.
type openingReader struct {
	EventReader
	o domain.Opener
}

// ReadAll implements EventReader.
func (r openingReader) ReadAll(ctx context.Context, f domain.EventFilter, afterPosition int64, limit int) ([]domain.Envelope, error) {
	events, err := r.EventReader.ReadAll(ctx, f, afterPosition, limit)
	if err != nil {
		return nil, err
	}
	return projections.OpenEvents(ctx, events, r.o)
}
