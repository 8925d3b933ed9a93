package projections

import (
	"context"
	"errors"

	"github.com/imledger/imledger/domain"
)

// Dead-letter reasons: stable strings in the "reason" header of im.dead.letter records and in
// the dead-letter table.
const (
	// ReasonBadEnvelope: the record value is not a decodable envelope. Never retried.
	ReasonBadEnvelope = "bad_envelope"
	// ReasonUnknownTenant: the event names a tenant that has no read-model database. Tenants are
	// provisioned by an operator command, never implicitly by an event, so this is an operator
	// problem: provision the tenant, then replay the dead letter. Never retried.
	ReasonUnknownTenant = "unknown_tenant"
	// ReasonUnknownEventType: the event type is not registered in this build (a newer writer, or
	// a typo). Acking it would lose it silently; upgrade, then replay. Never retried.
	ReasonUnknownEventType = "unknown_event_type"
	// ReasonBadEvent: the envelope decodes but the read model cannot place its payload
	// (domain.ErrInvalid): no seq or sender, a topic of the wrong kind, another tenant's event.
	// Content the store refuses is not one of these: the message is stored as a placeholder.
	// Never retried.
	ReasonBadEvent = "bad_event"
	// ReasonRetriesExhausted: applying the event failed with a non-transient error on every
	// attempt of the retry schedule.
	ReasonRetriesExhausted = "retries_exhausted"
)

// ErrUnknownTenant is returned by an Applier for an event whose tenant has no read model. The
// event is dead-lettered with ReasonUnknownTenant without retries.
var ErrUnknownTenant = errors.New("unknown tenant")

// permanentError is a failure that no retry can fix; it goes to the dead letters at once with
// its reason.
type permanentError struct {
	reason string
	err    error
}

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(reason string, err error) error { return &permanentError{reason: reason, err: err} }

// classify returns the dead-letter reason of err and whether retrying it can help.
func classify(err error) (reason string, retry bool) {
	var p *permanentError
	switch {
	case errors.As(err, &p):
		return p.reason, false
	case errors.Is(err, ErrUnknownTenant):
		return ReasonUnknownTenant, false
	default:
		return ReasonRetriesExhausted, true
	}
}

// isTransient reports whether err means a dependency was unreachable or the process is
// stopping. Such an event is never dead-lettered: it is redelivered until it applies.
func isTransient(err error) bool {
	return errors.Is(err, domain.ErrRetryable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// retryable marks a dependency failure as transient.
func retryable(op string, err error) error { return domain.Retryable("projections: "+op, err) }
