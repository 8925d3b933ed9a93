package projections

import (
	"context"
	"errors"
	"fmt"

	"github.com/imledger/imledger/domain"
)

// Applier writes events to one read model.
//
// Apply receives events of one tenant in consumption order (a conversation's events are never
// reordered) and must apply each event at most once per read model, even when it is called
// again with events it has seen (Kafka delivers at least once); it returns how many events were
// new. Errors wrapping domain.ErrRetryable mean the store was unreachable: nothing was written
// and the projection pauses and retries. ErrUnknownTenant sends the events to the dead letters
// at once. Any other error is retried on the Retry schedule, one event at a time, and then
// dead-lettered.
type Applier interface {
	Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (applied int, err error)
}

// CheckedApplier is an Applier that lets the projector finish a check while a batch is written.
// ApplyIf writes events as Apply does, calls ok before the batch takes effect, and when ok fails
// it writes nothing and returns ok's error as it is. The projector looks up whether any
// conversation of the batch is parked behind a dead letter this way, overlapping the Postgres
// lookup with the read-model write instead of waiting for it first.
type CheckedApplier interface {
	Applier
	ApplyIf(ctx context.Context, tenant domain.TenantID, events []domain.Envelope, ok func(context.Context) error) (applied int, err error)
}

// ApplierFunc adapts a function to Applier.
type ApplierFunc func(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error)

// Apply calls f.
func (f ApplierFunc) Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	return f(ctx, tenant, events)
}

// Projection is one read model fed by one Kafka consumer group.
type Projection struct {
	// Name labels the projection in logs, metrics and the replay command, e.g. "messages-mysql".
	Name string
	// ConsumerGroup is the Kafka consumer group and the idempotency scope of the read model.
	// Never renamed once published (see GroupMessagesMySQL).
	ConsumerGroup string
	// Topics are the base topic names (without the configured prefix) the projection consumes.
	Topics []string
	// Accept reports whether the projection handles an event type. Other events are acked
	// without being applied.
	Accept func(domain.EventType) bool
	// Applier writes accepted events.
	Applier Applier
}

// Validate reports what is missing from p.
func (p Projection) Validate() error {
	var errs []error
	if p.Name == "" {
		errs = append(errs, errors.New("projection: name is required"))
	}
	if p.ConsumerGroup == "" {
		errs = append(errs, fmt.Errorf("projection %s: consumer group is required", p.Name))
	}
	if len(p.Topics) == 0 {
		errs = append(errs, fmt.Errorf("projection %s: at least one topic is required", p.Name))
	}
	if p.Accept == nil || p.Applier == nil {
		errs = append(errs, fmt.Errorf("projection %s: accept and applier are required", p.Name))
	}
	return errors.Join(errs...)
}

// FailOn decorates an Applier for tests and drills: every call whose events include one for which
// fail returns a non-nil error fails with that error and applies nothing, as a read-model
// transaction that hits a bad row would. fail is called for every event and must be safe for
// concurrent use. The result is a CheckedApplier; its ApplyIf uses a's when a has one and
// otherwise calls ok before a.Apply.
func FailOn(a Applier, fail func(domain.Envelope) error) CheckedApplier {
	return failOn{a: a, fail: fail}
}

type failOn struct {
	a    Applier
	fail func(domain.Envelope) error
}

func (f failOn) check(events []domain.Envelope) error {
	for _, e := range events {
		if err := f.fail(e); err != nil {
			return fmt.Errorf("apply event %s: %w", e.EventID, err)
		}
	}
	return nil
}

func (f failOn) Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	if err := f.check(events); err != nil {
		return 0, err
	}
	return f.a.Apply(ctx, tenant, events)
}

func (f failOn) ApplyIf(ctx context.Context, tenant domain.TenantID, events []domain.Envelope, ok func(context.Context) error) (int, error) {
	if err := f.check(events); err != nil {
		return 0, err
	}
	if c, is := f.a.(CheckedApplier); is {
		return c.ApplyIf(ctx, tenant, events, ok)
	}
	if err := ok(ctx); err != nil {
		return 0, err
	}
	return f.a.Apply(ctx, tenant, events)
}
