package republish

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// DefaultTopic returns the default target of a tenant's replay, "im.replay.<tenant>" ("im.replay.all"
// for every tenant), to be prefixed like every topic.
func DefaultTopic(tenant domain.TenantID) string {
	if tenant.IsZero() {
		return "im.replay.all"
	}
	return "im.replay." + tenant.String()
}

// Config says what to republish and where.
type Config struct {
	// Topic is the full name of the target topic. Required; it must not be one of LiveTopics.
	Topic string
	// LiveTopics are the full names of the topics the relay and the platform write (the prefixed
	// internal/kafka topic names): a republish into one of them would hand every consumer group
	// of the platform the history again, so it is refused.
	LiveTopics []string
	// Tenant keeps one tenant's events; zero means every tenant.
	Tenant domain.TenantID
	// From is the cursor to resume after. Zero means the Checkpoint's cursor when there is one,
	// else the beginning of the log.
	From eventstore.Cursor
	// To, unless zero, is the last cursor republished (inclusive).
	To eventstore.Cursor
	// Checkpoint, unless empty, is a file that holds the cursor of the last acknowledged batch
	// and the Tenant and Topic it was sent for, rewritten after every batch: a republish of the
	// same Tenant and Topic that stopped resumes from it; one of another is refused.
	Checkpoint string
	// Rate caps the events sent per second; 0 means as fast as Kafka acknowledges.
	Rate int
	// BatchSize is how many events one produce call sends and one read of the store returns.
	// Default 1000; with a Rate it is at most Rate.
	BatchSize int
	// InFlight is how many batches RunAsync keeps in flight at once. Default 16.
	InFlight int
	// Progress, unless nil, receives a progress bar.
	Progress io.Writer
	// Logger receives what the republish did. Default: discard.
	Logger *slog.Logger
	// Now is the clock of the rate limit. Default time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.InFlight == 0 {
		c.InFlight = 16
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1000
	}
	if c.Rate > 0 && c.BatchSize > c.Rate {
		c.BatchSize = c.Rate
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// ErrLiveTopic is the error of a target that is one of the platform's live topics.
var ErrLiveTopic = errors.New("republish: the target is a live topic")

// Validate reports every invalid field at once, with defaults applied to unset ones.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if c.Topic == "" {
		errs = append(errs, errors.New("republish: a target topic is required"))
	}
	for _, live := range c.LiveTopics {
		if c.Topic == live {
			errs = append(errs, fmt.Errorf("%w: %s is written by imledger itself; choose another topic", ErrLiveTopic, c.Topic))
		}
	}
	if c.Rate < 0 || c.BatchSize < 1 || c.InFlight < 1 {
		errs = append(errs, errors.New("republish: Rate must not be negative and BatchSize and InFlight must be positive"))
	}
	if !c.To.IsZero() && !c.From.Before(c.To) {
		errs = append(errs, fmt.Errorf("republish: cursor range %s..%s is empty", c.From, c.To))
	}
	return errors.Join(errs...)
}

// Result is what a republish sent.
type Result struct {
	// Events is how many events were sent and acknowledged.
	Events int64
	// Cursor is where a later republish resumes to send exactly the events committed since.
	Cursor eventstore.Cursor
	// Duration is how long it took.
	Duration time.Duration
}

// PerSecond is the throughput in events per second.
func (r Result) PerSecond() float64 {
	if r.Duration <= 0 {
		return 0
	}
	return float64(r.Events) / r.Duration.Seconds()
}
