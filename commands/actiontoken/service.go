package actiontoken

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tokendb"
)

// Action is what a token allows.
type Action string

// The actions.
const (
	ActionResetPassword Action = "reset_password"
	ActionJoinGroup     Action = "join_group"
)

// ParseAction returns the action named s; an unknown one is a *domain.ValidationError.
func ParseAction(s string) (Action, error) {
	switch a := Action(s); a {
	case ActionResetPassword, ActionJoinGroup:
		return a, nil
	}
	return "", &domain.ValidationError{Field: "action", Reason: "unknown", Detail: "reset_password or join_group"}
}

// Stable refusal reasons (*domain.DeniedError, answered 403).
const (
	// ReasonTokenInvalid: no such token, or a token of another action.
	ReasonTokenInvalid = "action_token_invalid"
	// ReasonTokenUsed: the token was consumed or revoked.
	ReasonTokenUsed = "action_token_used"
	// ReasonTokenExpired: the token's time ran out.
	ReasonTokenExpired = "action_token_expired"
)

// States of a token, as its stream says and its row of im_action_tokens shows.
const (
	StateActive   = "active"
	StateConsumed = "consumed"
	StateRevoked  = "revoked"
)

// MaxSubjectLen bounds a token's subject.
const MaxSubjectLen = 128

// Config configures a Service.
type Config struct {
	// KeyPrefix starts every Redis key: <KeyPrefix><tenant>:atoken:<sha256>. Default "im:".
	KeyPrefix string `koanf:"key_prefix"`
	// DefaultTTL is a token's lifetime when Issue is given none. Default 24 h.
	DefaultTTL time.Duration `koanf:"default_ttl"`
	// MaxTTL bounds a token's lifetime. Default 30 days.
	MaxTTL time.Duration `koanf:"max_ttl"`
}

func (c *Config) setDefaults() {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "im:"
	}
	if c.DefaultTTL == 0 {
		c.DefaultTTL = 24 * time.Hour
	}
	if c.MaxTTL == 0 {
		c.MaxTTL = 30 * 24 * time.Hour
	}
}

// Validate reports every problem of c, with defaults applied.
func (c Config) Validate() error {
	c.setDefaults()
	if c.DefaultTTL < time.Second || c.MaxTTL < c.DefaultTTL {
		return errors.New("actiontoken: DefaultTTL must be at least 1s and MaxTTL at least DefaultTTL")
	}
	return nil
}

// EventStore is what the Service needs of the event store. *eventstore.Store satisfies it.
type EventStore interface {
	ReadStream(ctx context.Context, tenant domain.TenantID, streamID string, afterVersion int64, limit int) ([]domain.Envelope, error)
	Append(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope) ([]domain.Envelope, error)
}

var _ EventStore = (*eventstore.Store)(nil)

// Rows is the tenant's im_action_tokens, the read model of the token events; *tokendb.Store
// implements it. Apply writes events the Service appended (the action-tokens projection applies
// them again, idempotently); Find serves the rows written before tokens were events.
type Rows interface {
	Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error)
	Find(ctx context.Context, tenant domain.TenantID, hash, id string) (tokendb.Row, bool, error)
}

var _ Rows = (*tokendb.Store)(nil)

// Deps are the collaborators of a Service.
type Deps struct {
	// Redis is the hot cache of active tokens. Required: without it every operation fails
	// closed.
	Redis redis.UniversalClient
	// Events is the event store, whose token streams decide. Required.
	Events EventStore
	// Rows is the read model. Required.
	Rows Rows
	// Logger receives the failures of writing a row right after its event (the projection
	// writes it later). Default: discard.
	Logger *slog.Logger
}

// Service issues, consumes and revokes tokens. It is safe for concurrent use.
type Service struct {
	cfg  Config
	rdb  redis.UniversalClient
	es   EventStore
	rows Rows
	log  *slog.Logger
	now  func() time.Time
}

// New returns a Service; Redis, Events and Rows are required.
func New(cfg Config, deps Deps) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Redis == nil || deps.Events == nil || deps.Rows == nil {
		return nil, errors.New("actiontoken: Redis, the event store and the token rows are required")
	}
	cfg.setDefaults()
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, rdb: deps.Redis, es: deps.Events, rows: deps.Rows, log: log, now: time.Now}, nil
}

// Issue is a request for a token.
type Issue struct {
	Tenant  domain.TenantID
	Action  Action
	Subject string        // what the action applies to: a group topic, a user id, an enterprise code
	By      domain.UserID // who issues it; 0 for the system
	TTL     time.Duration // 0: Config.DefaultTTL
}

// Issued is a token issued; Token is shown once and never stored.
type Issued struct {
	Token     string
	TokenID   string
	ExpiresAt time.Time
}

// Consumed is a token consumed.
type Consumed struct {
	TokenID    string
	Action     Action
	Subject    string
	IssuedBy   domain.UserID // who issued it; 0 for the system
	ConsumedAt time.Time
}

func (s *Service) key(tenant domain.TenantID, hash string) string {
	return s.cfg.KeyPrefix + tenant.String() + ":atoken:" + hash
}

func hashOf(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// tokenNamespace is the UUID namespace of token ids.
var tokenNamespace = uuid.MustParse("6b1f3f0e-5d8a-4c57-9a63-1f7c2e9d4b20")

// tokenIDOf is the id of the token whose SHA-256 is hash (hex): a name-based UUID (version 5) of
// the hash, so the token names its own stream and deciding needs no lookup, while the id tells
// nothing of the token.
func tokenIDOf(hash string) string { return uuid.NewSHA1(tokenNamespace, []byte(hash)).String() }
