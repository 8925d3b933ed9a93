package hot

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
)

// Config configures a Store.
type Config struct {
	// Prefix starts every key; tests use a unique one. Default "im:". Must not contain '{' or '}',
	// which would break the hash tags that keep one topic's keys in one Redis Cluster slot.
	Prefix string
	// TTL is how long a message snapshot lives, counted from the message's send time; messages
	// older than that are not cached at all. Default 24h.
	TTL time.Duration
	// MinGroupSize caches snapshots only for groups with at least this many members, as the
	// GroupSizer reports. Default 0: every group.
	MinGroupSize int
	// MaxPerTopic caps the snapshots indexed per topic; the lowest seqs go first. Default 5000.
	MaxPerTopic int
	// StateTTL is the lifetime of the last-seq and read-seq keys, renewed by every write; an
	// expired key is reloaded from MySQL by the reader. Default 7 days.
	StateTTL time.Duration
}

func (c *Config) setDefaults() {
	if c.Prefix == "" {
		c.Prefix = "im:"
	}
	if c.TTL == 0 {
		c.TTL = 24 * time.Hour
	}
	if c.MaxPerTopic == 0 {
		c.MaxPerTopic = 5000
	}
	if c.StateTTL == 0 {
		c.StateTTL = 7 * 24 * time.Hour
	}
}

// Validate reports every invalid field at once.
func (c Config) Validate() error {
	var errs []error
	if strings.ContainsAny(c.Prefix, "{}") {
		errs = append(errs, errors.New("hot: Prefix must not contain braces"))
	}
	if c.TTL < time.Second {
		errs = append(errs, errors.New("hot: TTL must be at least 1s"))
	}
	if c.MinGroupSize < 0 {
		errs = append(errs, errors.New("hot: MinGroupSize must not be negative"))
	}
	if c.MaxPerTopic < 1 {
		errs = append(errs, errors.New("hot: MaxPerTopic must be positive"))
	}
	if c.StateTTL < time.Second {
		errs = append(errs, errors.New("hot: StateTTL must be at least 1s"))
	}
	return errors.Join(errs...)
}

// GroupSizer reports how many members a group has. It is declared here, by its user; the group
// read model implements it.
type GroupSizer interface {
	GroupSize(ctx context.Context, tenant domain.TenantID, groupID int64) (int, error)
}
