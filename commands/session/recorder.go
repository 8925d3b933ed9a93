package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// BatchStore is what Recorder needs: the group-commit append (*eventstore.Store).
type BatchStore interface {
	AppendBatch(ctx context.Context, events []domain.Envelope) ([]eventstore.AppendResult, error)
}

// RecorderConfig configures a Recorder.
type RecorderConfig struct {
	// Node is the node id written into every event. Required.
	Node string
	// QueueSize bounds the events waiting to be written; a full queue makes Opened and Closed
	// wait (bounded by their context). Default 4096.
	QueueSize int
	// MaxBatch is the most events one append writes. Default 500.
	MaxBatch int
	// RetryInterval is the pause before a failed append is tried again. Default 1 s.
	RetryInterval time.Duration
}

func (c *RecorderConfig) setDefaults() {
	if c.QueueSize == 0 {
		c.QueueSize = 4096
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 500
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = time.Second
	}
}

// Validate reports every bad field at once.
func (c RecorderConfig) Validate() error {
	var errs []error
	if c.Node == "" {
		errs = append(errs, errors.New("session recorder: node is required"))
	} else if !utf8.ValidString(c.Node) || strings.IndexByte(c.Node, 0) >= 0 {
		errs = append(errs, errors.New("session recorder: node must be UTF-8 without NUL"))
	}
	if c.QueueSize < 0 || c.MaxBatch < 0 || c.RetryInterval < 0 {
		errs = append(errs, errors.New("session recorder: sizes and intervals must not be negative"))
	}
	return errors.Join(errs...)
}

// Recorder appends session.opened.v1 and session.closed.v1 events for realtime sessions.
// Calls only queue the event; Run writes queued events in batches with one append each, so a
// burst of logins costs a few transactions, not one per session. Events are written at stream
// versions 1 (opened) and 2 (closed) of the session's own stream, so a retried batch is harmless:
// already stored events come back as conflicts and are dropped.
type Recorder struct {
	store BatchStore
	cfg   RecorderConfig
	log   *slog.Logger
	queue chan domain.Envelope
}

// NewRecorder validates cfg. Start Run in a goroutine.
func NewRecorder(store BatchStore, cfg RecorderConfig, log *slog.Logger) (*Recorder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Recorder{store: store, cfg: cfg, log: log, queue: make(chan domain.Envelope, cfg.QueueSize)}, nil
}

// withoutNUL drops NUL characters from free text: PostgreSQL's jsonb refuses them ("\u0000"),
// and so would refuse the event. Invalid UTF-8 needs nothing: the payload's encoding turns it into
// U+FFFD.
func withoutNUL(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "")
}

// Opened queues session.opened.v1. It fails only when ctx ends while the queue is full.
func (r *Recorder) Opened(ctx context.Context, tenant domain.TenantID, user domain.UserID, sessionID, userAgent string) error {
	p := domain.SessionOpened{User: user, SessionID: sessionID, Node: r.cfg.Node, UserAgent: withoutNUL(userAgent), OpenedAt: time.Now().UTC()}
	return r.enqueue(ctx, tenant, user, sessionID, 1, domain.EventSessionOpened, p)
}

// Closed queues session.closed.v1 for a session that Opened recorded.
func (r *Recorder) Closed(ctx context.Context, tenant domain.TenantID, user domain.UserID, sessionID, reason string) error {
	p := domain.SessionClosed{User: user, SessionID: sessionID, Node: r.cfg.Node, Reason: withoutNUL(reason), ClosedAt: time.Now().UTC()}
	return r.enqueue(ctx, tenant, user, sessionID, 2, domain.EventSessionClosed, p)
}

func (r *Recorder) enqueue(ctx context.Context, tenant domain.TenantID, user domain.UserID, sessionID string, version int64, typ domain.EventType, payload any) error {
	actor := domain.Actor{Type: domain.ActorUser, ID: user.String()}
	env, err := domain.NewEnvelope(tenant, domain.SessionStreamID(user, sessionID), version, typ, actor, payload)
	if err != nil {
		return fmt.Errorf("record session: %w", err)
	}
	select {
	case r.queue <- env:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("record session: %w", ctx.Err())
	}
}

// flushTimeout bounds how long Run keeps writing queued events after its context ended.
const flushTimeout = 5 * time.Second

// Run writes queued events until ctx ends, then writes what is still queued and returns. A
// batch in flight when ctx ends is still written: appends never run under the cancelled context,
// and retries stop flushTimeout after it ended (the events not written are then logged as lost).
func (r *Recorder) Run(ctx context.Context) {
	batch := make([]domain.Envelope, 0, r.cfg.MaxBatch)
	for {
		select {
		case env := <-r.queue:
			batch = r.drain(append(batch[:0], env))
			r.write(ctx, batch)
		case <-ctx.Done():
			for {
				batch = r.drain(batch[:0])
				if len(batch) == 0 {
					return
				}
				r.write(ctx, batch)
			}
		}
	}
}

// drain adds whatever is queued, up to MaxBatch events.
func (r *Recorder) drain(batch []domain.Envelope) []domain.Envelope {
	for len(batch) < r.cfg.MaxBatch {
		select {
		case env := <-r.queue:
			batch = append(batch, env)
		default:
			return batch
		}
	}
	return batch
}

// write appends batch, retrying transient failures; once ctx has ended it keeps trying for at
// most flushTimeout. A batch refused for good (an event PostgreSQL or the store does not take)
// is written again in halves, down to single events, so only the events refused on their own
// are lost, each logged; the others are written.
func (r *Recorder) write(ctx context.Context, batch []domain.Envelope) {
	var stopAt time.Time
	for {
		err := r.appendOnce(ctx, batch)
		if err == nil {
			return
		}
		if ctx.Err() != nil && stopAt.IsZero() {
			stopAt = time.Now().Add(flushTimeout)
		}
		if !errors.Is(err, domain.ErrRetryable) {
			r.split(ctx, batch, err)
			return
		}
		if !stopAt.IsZero() && time.Now().After(stopAt) {
			r.log.ErrorContext(ctx, "session events lost", "events", len(batch), "err", err)
			return
		}
		r.log.WarnContext(ctx, "session events not written yet; retrying", "events", len(batch), "err", err)
		time.Sleep(r.cfg.RetryInterval)
	}
}

// split writes the halves of a batch the store refused with err, or gives up its one event.
func (r *Recorder) split(ctx context.Context, batch []domain.Envelope, err error) {
	if len(batch) == 1 {
		e := batch[0]
		r.log.ErrorContext(ctx, "session event lost", "tenant_id", e.TenantID.String(), "event_id", e.EventID.String(),
			"event_type", string(e.EventType), "err", err)
		return
	}
	half := len(batch) / 2
	r.write(ctx, batch[:half])
	r.write(ctx, batch[half:])
}

// appendOnce runs one append outside ctx's cancellation, bounded by flushTimeout.
func (r *Recorder) appendOnce(ctx context.Context, batch []domain.Envelope) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	_, err := r.store.AppendBatch(wctx, batch)
	return err
}
