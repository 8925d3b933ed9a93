package projections

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/domain"
)

// Opened returns p with its Applier opening the sealed values of every event first (DESIGN
// §7a): the read model gets plaintext where the data key exists and the erased marker where
// it was destroyed, never an error for a missing key. An Opener that fails otherwise (the key
// store unreachable, a keeper refusing) fails the batch as retryable, so the projection pauses
// and retries instead of parking the conversation. o nil returns p as it is.
func Opened(p Projection, o domain.Opener) Projection {
	if o == nil {
		return p
	}
	oa := openingApplier{inner: p.Applier, o: o}
	if c, ok := p.Applier.(CheckedApplier); ok {
		p.Applier = openingCheckedApplier{openingApplier: oa, checked: c}
	} else {
		p.Applier = oa
	}
	return p
}

// openingApplier opens events, then applies them with inner.
type openingApplier struct {
	inner Applier
	o     domain.Opener
}

// Apply implements Applier.
func (a openingApplier) Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	opened, err := openAll(ctx, events, a.o)
	if err != nil {
		return 0, err
	}
	return a.inner.Apply(ctx, tenant, opened)
}

// openingCheckedApplier is openingApplier over a CheckedApplier.
type openingCheckedApplier struct {
	openingApplier
	checked CheckedApplier
}

// ApplyIf implements CheckedApplier.
func (a openingCheckedApplier) ApplyIf(ctx context.Context, tenant domain.TenantID, events []domain.Envelope, ok func(context.Context) error) (int, error) {
	opened, err := openAll(ctx, events, a.o)
	if err != nil {
		return 0, err
	}
	return a.checked.ApplyIf(ctx, tenant, opened, ok)
}

// openAll returns events opened, copying the slice only when an event holds sealed values.
func openAll(ctx context.Context, events []domain.Envelope, o domain.Opener) ([]domain.Envelope, error) {
	out := events
	for i := range events {
		if !domain.HasSealed(events[i].Payload) {
			continue
		}
		if &out[0] == &events[0] {
			out = append([]domain.Envelope(nil), events...)
		}
		e, err := domain.OpenEnvelope(ctx, events[i], o)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", domain.ErrRetryable, err)
		}
		out[i] = e
	}
	return out, nil
}

// OpenEvents returns events with their sealed values opened as Opened opens them, copying the
// slice only when an event holds sealed values; a failure of o is retryable. Readers of the log
// (replay.OpenedEvents) use it to see what the live projections see.
func OpenEvents(ctx context.Context, events []domain.Envelope, o domain.Opener) ([]domain.Envelope, error) {
	return openAll(ctx, events, o)
}
