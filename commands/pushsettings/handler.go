package pushsettings

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// Store is what the handler needs of the event store. *eventstore.Store satisfies it.
type Store interface {
	// LastEvent returns the stream's newest event and whether it has any.
	LastEvent(ctx context.Context, tenant domain.TenantID, streamID string) (domain.Envelope, bool, error)
	// Append appends at the expected version; domain.ErrConcurrency when the stream moved.
	Append(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope) ([]domain.Envelope, error)
}

var _ Store = (*eventstore.Store)(nil)

// Meta is the tracing metadata a change carries into its event.
type Meta struct {
	TraceID       string
	CorrelationID string
	CausationID   string
}

// PreLog answers for the settings recorded before they were events (rows of the read model that
// no stream holds): such a row is the current state of a stream without events, until a change
// recorded in the log replaces it. *pushdb.Store implements it.
type PreLog interface {
	PreLogDevice(ctx context.Context, tenant domain.TenantID, user domain.UserID, deviceID string) (bool, error)
	PreLogMute(ctx context.Context, tenant domain.TenantID, user domain.UserID, topic domain.Topic) (bool, error)
}

// Deps are the collaborators of a Handler.
type Deps struct {
	// Store is the event store. Required.
	Store Store
	// PreLog answers for settings older than the log. Optional: without it a stream without
	// events is an unregistered device, an unmuted conversation.
	PreLog PreLog
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Handler decides push settings changes. It is safe for concurrent use.
type Handler struct {
	store  Store
	prelog PreLog
	now    func() time.Time
}

// New checks deps and returns a Handler.
func New(deps Deps) (*Handler, error) {
	if deps.Store == nil {
		return nil, errors.New("pushsettings: an event store is required")
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	return &Handler{store: deps.Store, prelog: deps.PreLog, now: deps.Now}, nil
}

// maxAttempts bounds how often a change is decided again after losing a race for its stream.
const maxAttempts = 5

// decision is what decide makes of a stream's last event: the event to append (none: nothing to
// change).
type decision struct {
	typ     domain.EventType
	payload any
}

// execute reads the last event of stream, decides, and appends at its version; a lost race is
// decided again. It reports whether an event was appended.
func (h *Handler) execute(ctx context.Context, tenant domain.TenantID, user domain.UserID, stream string, meta Meta,
	decide func(last domain.Envelope, found bool, now time.Time) (decision, error)) (bool, error) {
	for attempt := 1; ; attempt++ {
		last, found, err := h.store.LastEvent(ctx, tenant, stream)
		if err != nil {
			return false, err
		}
		d, err := decide(last, found, h.now().UTC().Truncate(time.Millisecond))
		if err != nil || d.typ == "" {
			return false, err
		}
		env, err := domain.NewEnvelope(tenant, stream, last.StreamVersion+1, d.typ,
			domain.Actor{Type: domain.ActorUser, ID: user.String()}, d.payload)
		if err != nil {
			return false, err
		}
		env.TraceID, env.CorrelationID, env.CausationID, env.BizID = meta.TraceID, meta.CorrelationID, meta.CausationID, user.String()
		_, err = h.store.Append(ctx, tenant, stream, last.StreamVersion, []domain.Envelope{env})
		if errors.Is(err, domain.ErrConcurrency) && attempt < maxAttempts {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("pushsettings: %w", err)
		}
		return true, nil
	}
}
