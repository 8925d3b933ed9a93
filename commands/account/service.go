package account

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/commands/account/passhash"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/pgerr"
)

// Errors of the account operations. Transport answers both with a fixed 401 and no detail.
var (
	// ErrInvalidCredentials is every failed login: unknown login, wrong password, an account
	// whose registration never completed.
	ErrInvalidCredentials = errors.New("invalid credentials")
	// ErrInvalidAPIKey is an API key that is malformed, unknown or revoked.
	ErrInvalidAPIKey = errors.New("invalid API key")
	// ErrHashingBusy is the cause of the retryable error of a registration or login that
	// waited Config.HashWait without its turn to hash.
	ErrHashingBusy = errors.New("too many password hashes in progress")
)

// ReasonLoginTaken is the *domain.DeniedError reason of a registration whose login name is taken.
const ReasonLoginTaken = "login_taken"

// Store is what the Service needs from the event store. *eventstore.Store satisfies it.
type Store interface {
	Append(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope) ([]domain.Envelope, error)
	// AppendWith appends and runs hook in the append's transaction: the API key table is
	// written with its events.
	AppendWith(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope, hook eventstore.TxHook) ([]domain.Envelope, error)
	LastVersion(ctx context.Context, tenant domain.TenantID, streamID string) (int64, error)
	// LastEvent returns a stream's newest event: an API key's current state.
	LastEvent(ctx context.Context, tenant domain.TenantID, streamID string) (domain.Envelope, bool, error)
}

var _ Store = (*eventstore.Store)(nil)

// Deps are the collaborators of a Service.
type Deps struct {
	// Pool is the event store's PostgreSQL pool, where the credentials and API key tables live
	// (migrations/postgres). Required.
	Pool *pgxpool.Pool
	// Store is the event store. Required.
	Store Store
	// IDs draws new user ids. Default: a Snowflake with a random node id.
	IDs IDGenerator
	// Logger receives best-effort failures (a credential that could not be released or
	// confirmed). Default: discard.
	Logger *slog.Logger
	// Sealer seals the profile a registration records (DESIGN §7a). Optional: nil stores it as
	// given.
	Sealer domain.Sealer
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Service registers users, checks logins and manages tenant API keys. It is safe for
// concurrent use.
type Service struct {
	cfg   Config
	pool  *pgxpool.Pool
	store Store
	// sealer seals registered profiles; nil: none.
	sealer domain.Sealer
	ids    IDGenerator
	log    *slog.Logger
	now    func() time.Time

	// dummyHash is verified against when a login is unknown, so that an unknown login costs
	// the same hashing work as a wrong password.
	dummyHash string
	// hashSlots holds a token for every hash or verification running; its capacity is
	// Config.HashConcurrency.
	hashSlots chan struct{}

	keysMu sync.Mutex
	keys   map[[32]byte]cachedKey

	// users holds users known to exist (requireAccount): a user never stops existing, so a
	// positive answer is kept, up to maxKnownUsers (then the set starts again).
	usersMu sync.Mutex
	users   map[knownUser]struct{}
}

type knownUser struct {
	tenant domain.TenantID
	user   domain.UserID
}

// maxKnownUsers bounds Service.users.
const maxKnownUsers = 100_000

// New validates deps and cfg and returns a Service.
func New(deps Deps, cfg Config) (*Service, error) {
	cfg.setDefaults()
	var errs []error
	if deps.Pool == nil {
		errs = append(errs, errors.New("account: Pool is required"))
	}
	if deps.Store == nil {
		errs = append(errs, errors.New("account: Store is required"))
	}
	errs = append(errs, cfg.Validate())
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, pool: deps.Pool, store: deps.Store, ids: deps.IDs, sealer: deps.Sealer, log: deps.Logger, now: deps.Now,
		keys: map[[32]byte]cachedKey{}, hashSlots: make(chan struct{}, cfg.HashConcurrency)}
	if s.ids == nil {
		s.ids = randomSnowflake()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	dummy, err := passhash.Dummy(cfg.Password)
	if err != nil {
		return nil, fmt.Errorf("account: %w", err)
	}
	s.dummyHash = dummy
	return s, nil
}

// Config returns the configuration with defaults applied.
func (s *Service) Config() Config { return s.cfg }

// dbErr wraps a PostgreSQL failure for op: a transient one (internal/pgerr) is a
// *domain.RetryableError; a cancelled context and anything else stay plain wrapped errors.
func dbErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if pgerr.Transient(err) {
		return domain.Retryable(op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// uniqueViolation reports whether err is a unique violation of constraint.
func uniqueViolation(err error, constraint string) bool {
	c, ok := pgerr.Unique(err)
	return ok && c == constraint
}

// detached returns a context for cleanup that must run even when ctx was cancelled.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
}
