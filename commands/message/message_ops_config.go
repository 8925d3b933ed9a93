package message

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/imledger/imledger/domain"
)

// MessageOpsConfig configures the recall, edit, delete-for-me and read-mark handlers.
type MessageOpsConfig struct {
	// RecallWindow is how long after sending the sender may recall a message. Default 10 min.
	RecallWindow time.Duration
	// EditWindow is how long after sending the sender may edit a message. Default 24 h.
	EditWindow time.Duration
	// MaxContentBytes limits edited content. Default domain.DefaultMaxContentBytes.
	MaxContentBytes int
	// MaxAttempts bounds retries of an append that lost a race on a per-user stream
	// (deletions, read marks). Default 5.
	MaxAttempts int
}

func (c *MessageOpsConfig) setDefaults() {
	if c.RecallWindow == 0 {
		c.RecallWindow = 10 * time.Minute
	}
	if c.EditWindow == 0 {
		c.EditWindow = 24 * time.Hour
	}
	if c.MaxContentBytes == 0 {
		c.MaxContentBytes = domain.DefaultMaxContentBytes
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
}

// Validate reports every bad field at once.
func (c MessageOpsConfig) Validate() error {
	c.setDefaults()
	var errs []error
	if c.RecallWindow < 0 {
		errs = append(errs, errors.New("recall_window must not be negative"))
	}
	if c.EditWindow < 0 {
		errs = append(errs, errors.New("edit_window must not be negative"))
	}
	if c.MaxContentBytes < 0 {
		errs = append(errs, errors.New("max_content_bytes must not be negative"))
	}
	if c.MaxAttempts < 0 {
		errs = append(errs, errors.New("max_attempts must not be negative"))
	}
	return errors.Join(errs...)
}

// MessageOpsDeps are the collaborators of a MessageOpsHandler.
type MessageOpsDeps struct {
	Store StreamStore // required
	// Listener hears about every recall and edit right after it commits: realtime delivery.
	// Optional.
	Listener ChangeListener
	// Reads hears about every read mark that moved forward, right after it commits: a user's
	// other devices learn it on the user's channel. Optional.
	Reads ReadListener
	// Policy, when set, is asked before an edit whether its sender may still post to the topic:
	// an edit puts new content in front of the members, so a sender removed, banned or muted
	// since, or blocked by the peer, may not edit. Recall and the other operations do not ask.
	Policy SendPolicy
	// Sealer seals an edit's content under the editor's data key (DESIGN §7a). Optional: nil
	// stores plaintext.
	Sealer domain.Sealer
	Logger *slog.Logger // default discards
}

// MessageOpsHandler handles the commands that act on sent messages: recall and edit by the sender,
// delete for one user, and read/receive marks. Each appends to the message's own stream with an
// expected version, so two concurrent operations on one message never both win.
type MessageOpsHandler struct {
	store    StreamStore
	listener ChangeListener // nil: none
	reads    ReadListener   // nil: none
	policy   SendPolicy     // nil: edits are not checked against it
	sealer   domain.Sealer  // nil: edits are stored as sent
	log      *slog.Logger
	cfg      MessageOpsConfig
	now      func() time.Time
}

// NewMessageOpsHandler validates cfg and returns a handler over deps.Store.
func NewMessageOpsHandler(deps MessageOpsDeps, cfg MessageOpsConfig) (*MessageOpsHandler, error) {
	if deps.Store == nil {
		return nil, errors.New("message ops: Store is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &MessageOpsHandler{store: deps.Store, listener: deps.Listener, reads: deps.Reads, policy: deps.Policy, sealer: deps.Sealer, log: deps.Logger, cfg: cfg,
		now: func() time.Time { return time.Now().UTC() }}, nil
}

// changed tells the listener about a committed change. The change is committed, so it is told
// even when the caller's context has ended.
func (h *MessageOpsHandler) changed(ctx context.Context, c CommittedChange) {
	if h.listener == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	safely(ctx, h.log, "change listener", func() { h.listener.MessageChanged(ctx, c) })
}
