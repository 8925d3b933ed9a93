package admin

import (
	"errors"
	"time"

	"github.com/imledger/imledger/domain/admintrust"
)

// DefaultConsumerGroup is the consumer group of the admin command consumer. Never renamed: a new
// name would take every retained command again.
const DefaultConsumerGroup = "imledger.admin.commands.v1"

// Config configures a Consumer.
type Config struct {
	// ConsumerGroup is the Kafka consumer group and the dedupe scope of the commands. Every node
	// of a deployment uses the same one, so each command runs on one node. Default
	// DefaultConsumerGroup.
	ConsumerGroup string `koanf:"consumer_group"`
	// AllowedSources lists the source_service values commands may come from; empty accepts any.
	// A command from another source is rejected actor_forbidden. The source is what the
	// producer writes; the producer keys are what authenticates it.
	AllowedSources []string `koanf:"allowed_sources"`

	// ProducerKeys are the keys commands are verified with (DESIGN §7a): each with an id, a
	// scope (every tenant, or one) and the identity its commands act as. A command is verified
	// before anything else is read of it; one signed with no key here is refused unknown_key.
	// Two keys of one identity may be valid at once, for a rotation. The binary fills it from
	// admin.producer_keys.
	ProducerKeys []admintrust.ProducerKey `koanf:"-"`
	// SecretKeys are the node's command-secrets keys: the X25519 private keys sealed secret
	// fields (a password) are opened with, right before the handler that needs them. Two keys
	// may be valid at once, for a rotation. The binary fills it from admin.command_secret_keys.
	SecretKeys []admintrust.OpenKey `koanf:"-"`
	// AllowUnsigned accepts commands without a signature (acting as the actor their envelope
	// names) and plain-text secret fields. Never with real Kafka brokers: the binary sets it only
	// with the embedded broker and admin.allow_unsigned, and warns at start. Default false:
	// unsigned commands are refused signature_required, plain secrets secret_not_sealed.
	AllowUnsigned bool `koanf:"-"`
	// ReplayWindow is how old a command's signing time may be when it is consumed; an older one
	// is refused stale_command, so a signed record produced again later than this never runs.
	// Within it a record produced again is answered from the event_id ledger. Default 5 min.
	ReplayWindow time.Duration `koanf:"replay_window"`
	// ClockLeeway is the clock skew tolerated between producers and nodes, added to the replay
	// window and allowed into the future. Default 30 s.
	ClockLeeway time.Duration `koanf:"clock_leeway"`
	// Retry is the backoff of a command that failed transiently, before it is dead-lettered.
	Retry RetryConfig `koanf:"retry"`
	// ClaimTimeout is how long a command may stay claimed by a consumer that does not finish it
	// (it died) before another takes it over. Keep it above the longest command. Default 1 min.
	ClaimTimeout time.Duration `koanf:"claim_timeout"`
	// CommandTimeout bounds one attempt of a command. Default 30 s.
	CommandTimeout time.Duration `koanf:"command_timeout"`
	// CloseTimeout bounds how long Run waits for commands in flight when it stops. Default 30 s.
	CloseTimeout time.Duration `koanf:"close_timeout"`

	// MaxBatch bounds the records of one partition taken as one batch: claimed with one
	// statement, its keys run concurrently, answered with one statement and one produce flush.
	// A batch's results wait for its slowest command (a retried one holds the batch's answers
	// back). One record at a time, a partition runs one command per claim, run, finish and
	// produce cycle: on the embedded broker's twelve partitions a closed loop left the machine a
	// fifth idle at about 1,580 commands/s, and ran at 2,385-2,614 with batches of 16. Default 16.
	MaxBatch int `koanf:"max_batch"`
	// Concurrency bounds the commands a consumer runs at once (commands of one record key run
	// one after another). Keep it near the PostgreSQL pool size. Default 16.
	Concurrency int `koanf:"concurrency"`

	// MaxResultBytes bounds a result record (key, value and headers); the binary sets it to
	// kafka.max_message_bytes. A result that would be larger is stored and published as a small
	// failed result, reason result_too_large, whose details keep the original status and reason;
	// so is one the broker refuses as too large. Default 1,000,000 (Kafka's default limit).
	MaxResultBytes int `koanf:"-"`

	// ResultTopic is the full name of im.admin.command.result; the binary sets it from the kafka
	// section. Required.
	ResultTopic string `koanf:"-"`
	// DeadLetterTopic is the full name of im.dead.letter; the binary sets it. Required.
	DeadLetterTopic string `koanf:"-"`
}

// RetryConfig is an exponential backoff.
type RetryConfig struct {
	// MaxRetries is how many times a command that failed transiently is tried again before it is
	// dead-lettered and answered failed. Default 5.
	MaxRetries int `koanf:"max_retries"`
	// InitialInterval is the first wait. Default 100 ms.
	InitialInterval time.Duration `koanf:"initial_interval"`
	// MaxInterval caps a wait. Default 5 s.
	MaxInterval time.Duration `koanf:"max_interval"`
	// Multiplier grows the wait after each retry. Default 2.
	Multiplier float64 `koanf:"multiplier"`
}

func (c *Config) setDefaults() {
	if c.ConsumerGroup == "" {
		c.ConsumerGroup = DefaultConsumerGroup
	}
	if c.Retry.MaxRetries == 0 {
		c.Retry.MaxRetries = 5
	}
	if c.Retry.InitialInterval == 0 {
		c.Retry.InitialInterval = 100 * time.Millisecond
	}
	if c.Retry.MaxInterval == 0 {
		c.Retry.MaxInterval = 5 * time.Second
	}
	if c.Retry.Multiplier == 0 {
		c.Retry.Multiplier = 2
	}
	if c.ClaimTimeout == 0 {
		c.ClaimTimeout = time.Minute
	}
	if c.CommandTimeout == 0 {
		c.CommandTimeout = 30 * time.Second
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 30 * time.Second
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 16
	}
	if c.Concurrency == 0 {
		c.Concurrency = 16
	}
	if c.MaxResultBytes == 0 {
		c.MaxResultBytes = 1_000_000
	}
	if c.ReplayWindow == 0 {
		c.ReplayWindow = 5 * time.Minute
	}
	if c.ClockLeeway == 0 {
		c.ClockLeeway = 30 * time.Second
	}
}

// Validate reports every bad field at once, with defaults applied. The topics are not checked:
// the binary fills them in.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if c.Retry.MaxRetries < 0 {
		errs = append(errs, errors.New("admin.retry.max_retries must not be negative"))
	}
	if c.Retry.InitialInterval < 0 || c.Retry.MaxInterval < c.Retry.InitialInterval {
		errs = append(errs, errors.New("admin.retry.initial_interval must not be negative nor above admin.retry.max_interval"))
	}
	if c.Retry.Multiplier < 1 {
		errs = append(errs, errors.New("admin.retry.multiplier must be at least 1"))
	}
	if c.ClaimTimeout <= 0 || c.CommandTimeout <= 0 || c.CloseTimeout <= 0 {
		errs = append(errs, errors.New("admin.claim_timeout, admin.command_timeout and admin.close_timeout must be positive"))
	}
	if c.ClaimTimeout <= c.CommandTimeout {
		errs = append(errs, errors.New("admin.claim_timeout must be above admin.command_timeout"))
	}
	if c.MaxResultBytes < 1 {
		errs = append(errs, errors.New("admin: the result limit (kafka.max_message_bytes) must be positive"))
	}
	if c.MaxBatch < 1 || c.Concurrency < 1 {
		errs = append(errs, errors.New("admin.max_batch and admin.concurrency must be positive"))
	}
	if c.ReplayWindow <= 0 || c.ClockLeeway < 0 {
		errs = append(errs, errors.New("admin.replay_window must be positive and admin.clock_leeway not negative"))
	}
	if _, err := admintrust.NewVerifier(max(c.ReplayWindow, 1), max(c.ClockLeeway, 0), c.ProducerKeys...); err != nil {
		errs = append(errs, errors.New("admin.producer_keys: "+err.Error()))
	}
	if _, err := admintrust.NewOpener(c.SecretKeys...); err != nil {
		errs = append(errs, errors.New("admin.command_secret_keys: "+err.Error()))
	}
	return errors.Join(errs...)
}
