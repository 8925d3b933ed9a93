package commands

import (
	"errors"
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

// MessageOpsHandler handles the commands that act on sent messages: recall and edit by the sender,
// delete for one user, and read/receive marks. Each appends to the message's own stream with an
// expected version, so two concurrent operations on one message never both win.
type MessageOpsHandler struct {
	store StreamStore
	cfg   MessageOpsConfig
	now   func() time.Time
}

// NewMessageOpsHandler validates cfg and returns a handler over store.
func NewMessageOpsHandler(store StreamStore, cfg MessageOpsConfig) (*MessageOpsHandler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	return &MessageOpsHandler{store: store, cfg: cfg, now: func() time.Time { return time.Now().UTC() }}, nil
}
