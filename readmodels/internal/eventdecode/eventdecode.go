// Package eventdecode holds what the MySQL read models do alike before they apply a batch of
// events: keep the first of repeated event ids, refuse an event of another tenant and report a
// malformed event as a bad_event validation error. What an event decodes to differs per read
// model, so Batch takes the read model's own decode function and error type.
package eventdecode

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
)

// Bad is the error of an event that can never be applied: projectors park it instead of
// retrying, since no retry can make it valid.
func Bad(field, detail string) error {
	return &domain.ValidationError{Field: field, Reason: "bad_event", Detail: detail}
}

// Batch decodes events in order with decode, which gets each event's index in events, and drops
// repeats of an event id within the batch: a redelivery inside one batch must apply once. An
// event of another tenant is refused before decode sees it; decode sees every event upcast to
// the current version of its type (domain.Upcast), whoever read it. The first error stops the batch and
// is returned as wrap(index, event id, err), so each read model names the failing event in its
// own error type.
func Batch[T any](tenant domain.TenantID, events []domain.Envelope,
	decode func(i int, env domain.Envelope) (T, error), wrap func(i int, id uuid.UUID, err error) error) ([]T, error) {
	out := make([]T, 0, len(events))
	seen := make(map[uuid.UUID]bool, len(events))
	for i, env := range events {
		if seen[env.EventID] {
			continue
		}
		seen[env.EventID] = true
		if env.TenantID != tenant {
			detail := fmt.Sprintf("event of tenant %q applied to tenant %q", env.TenantID, tenant)
			return nil, wrap(i, env.EventID, Bad("tenant_id", detail))
		}
		env, err := domain.Upcast(env)
		if err != nil {
			return nil, wrap(i, env.EventID, err)
		}
		v, err := decode(i, env)
		if err != nil {
			return nil, wrap(i, env.EventID, err)
		}
		out = append(out, v)
	}
	return out, nil
}
