package tenant

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// Store is what the registry needs of the event store. *eventstore.Store satisfies it.
type Store interface {
	ReadStream(ctx context.Context, tenant domain.TenantID, streamID string, afterVersion int64, limit int) ([]domain.Envelope, error)
	AppendWith(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope, hook eventstore.TxHook) ([]domain.Envelope, error)
}

var _ Store = (*eventstore.Store)(nil)

// Databases creates a tenant's read-model database and applies its migrations; it must be
// idempotent. readmodels/tenantdb.Router implements it.
type Databases interface {
	Provision(ctx context.Context, tenant domain.TenantID) error
}

// Notifier hears every committed change of a tenant, after the commit, with the tenant's new
// state. It must not block for long; it is best effort.
type Notifier interface {
	TenantChanged(ctx context.Context, info Info)
}

// Deps are the collaborators of a Registry.
type Deps struct {
	// Pool is the event store's pool, where the tenants table lives. Required.
	Pool *pgxpool.Pool
	// Store is the event store. Required.
	Store Store
	// Databases provisions read-model databases. Optional: without it Provision records the
	// tenant only (a deployment without MySQL).
	Databases Databases
	// Notifier hears committed changes. Optional.
	Notifier Notifier
	// Logger receives best-effort failures. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Registry provisions, suspends, resumes and configures tenants and answers which exist. It is
// safe for concurrent use.
type Registry struct {
	pool  *pgxpool.Pool
	store Store
	dbs   Databases
	notif Notifier
	log   *slog.Logger
	now   func() time.Time
}

// New validates deps and returns a Registry.
func New(deps Deps) (*Registry, error) {
	if deps.Pool == nil || deps.Store == nil {
		return nil, errors.New("tenant: Pool and Store are required")
	}
	r := &Registry{pool: deps.Pool, store: deps.Store, dbs: deps.Databases, notif: deps.Notifier, log: deps.Logger, now: deps.Now}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r, nil
}

// Info is a tenant as the registry holds it.
type Info struct {
	Tenant    domain.TenantID
	Status    domain.TenantStatus
	Settings  domain.TenantSettings
	Version   int64
	NotBefore time.Time // zero: never suspended
	// RetainedBefore is the retention horizon: the tenant's messages that occurred before it
	// left the read models (domain.TenantRetentionApplied). Zero: retention never ran.
	RetainedBefore time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Active reports whether the tenant is served.
func (i Info) Active() bool { return i.Status == domain.TenantStatusActive }

// Check returns nil for an active tenant and a *domain.DeniedError tenant_suspended otherwise.
func (i Info) Check() error {
	if !i.Active() {
		return domain.Deny(domain.ReasonTenantSuspended)
	}
	return nil
}

func infoOf(s domain.TenantState) Info {
	return Info{Tenant: s.Tenant(), Status: s.Status(), Settings: s.Settings(), Version: s.Version(),
		NotBefore: s.NotBefore(), RetainedBefore: s.RetainedBefore(), CreatedAt: s.CreatedAt(), UpdatedAt: s.UpdatedAt()}
}

// Meta attributes a change: who made it (the events' actor; zero means {system, imledger}), the
// trace and the command it answers (causation_id).
type Meta struct {
	Actor       domain.Actor
	TraceID     string
	CausationID string
}

// Result is the outcome of a registry command: the tenant after it, and whether nothing changed.
type Result struct {
	Info      Info
	Unchanged bool
}

// maxAttempts bounds how often a command is decided again after losing a race.
const maxAttempts = 5

// Provision creates tenant: its read-model database first (when Databases is set), then the
// registry entry with settings (changes as domain.ApplyTenantSettings takes them; nil for none).
// Provisioning an existing tenant makes sure its database exists and is otherwise Unchanged.
// Errors: *domain.ValidationError for bad settings; the database's error (retryable when the
// server is unreachable); domain.ErrRetryable when PostgreSQL failed.
func (r *Registry) Provision(ctx context.Context, tenant domain.TenantID, settings map[string]json.RawMessage, meta Meta) (Result, error) {
	var initial domain.TenantSettings
	if len(settings) > 0 {
		var err error
		if initial, err = domain.ApplyTenantSettings(domain.TenantSettings{}, settings); err != nil {
			return Result{}, err
		}
	}
	if r.dbs != nil {
		if err := r.dbs.Provision(ctx, tenant); err != nil {
			return Result{}, fmt.Errorf("provision tenant %s: %w", tenant, err)
		}
	}
	return r.execute(ctx, tenant, meta, func(s domain.TenantState, now time.Time) ([]domain.PendingEvent, error) {
		return s.Provision(initial, now), nil
	})
}

// Suspend suspends tenant; a suspended tenant is Unchanged. Errors: *domain.DeniedError
// tenant_not_found; domain.ErrRetryable.
func (r *Registry) Suspend(ctx context.Context, tenant domain.TenantID, reason string, meta Meta) (Result, error) {
	return r.execute(ctx, tenant, meta, func(s domain.TenantState, now time.Time) ([]domain.PendingEvent, error) {
		return s.Suspend(reason, now)
	})
}

// Resume resumes tenant; an active tenant is Unchanged. Errors as Suspend.
func (r *Registry) Resume(ctx context.Context, tenant domain.TenantID, meta Meta) (Result, error) {
	return r.execute(ctx, tenant, meta, func(s domain.TenantState, now time.Time) ([]domain.PendingEvent, error) {
		return s.Resume(now)
	})
}

// SetConfig changes tenant's settings (see domain.ApplyTenantSettings). Errors as Suspend, and
// *domain.ValidationError for an unknown key or a bad value.
func (r *Registry) SetConfig(ctx context.Context, tenant domain.TenantID, changes map[string]json.RawMessage, meta Meta) (Result, error) {
	return r.execute(ctx, tenant, meta, func(s domain.TenantState, now time.Time) ([]domain.PendingEvent, error) {
		return s.SetConfig(changes, now)
	})
}

// ApplyRetention records tenant.retention_applied.v1 with horizon (domain.TenantState.ApplyRetention)
// and the tenants row's retained_before with it; Unchanged when the recorded horizon is not
// before it. The caller removes the history first. Errors as Suspend.
func (r *Registry) ApplyRetention(ctx context.Context, tenant domain.TenantID, horizon time.Time, meta Meta) (Result, error) {
	return r.execute(ctx, tenant, meta, func(s domain.TenantState, now time.Time) ([]domain.PendingEvent, error) {
		if !s.Exists() {
			return nil, domain.Deny(domain.ReasonTenantNotFound)
		}
		return s.ApplyRetention(horizon, now), nil
	})
}

// execute loads the tenant, decides, and appends the events together with the tenants row; a
// lost race is decided again.
func (r *Registry) execute(ctx context.Context, tenant domain.TenantID, meta Meta,
	decide func(domain.TenantState, time.Time) ([]domain.PendingEvent, error)) (Result, error) {
	actor := meta.Actor
	if actor == (domain.Actor{}) {
		actor = domain.Actor{Type: domain.ActorSystem, ID: domain.SourceService}
	}
	for attempt := 1; ; attempt++ {
		st, err := r.load(ctx, tenant)
		if err != nil {
			return Result{}, err
		}
		events, err := decide(st, r.now())
		if err != nil {
			return Result{}, err
		}
		if len(events) == 0 {
			return Result{Info: infoOf(st), Unchanged: true}, nil
		}
		envs, err := domain.NewEnvelopes(tenant, actor, events)
		if err != nil {
			return Result{}, err
		}
		for i := range envs {
			envs[i].TraceID, envs[i].CausationID, envs[i].BizID = meta.TraceID, meta.CausationID, tenant.String()
		}
		next := st
		_, err = r.store.AppendWith(ctx, tenant, domain.TenantStreamID, st.Version(), envs,
			func(ctx context.Context, tx pgx.Tx, stored []domain.Envelope) error {
				for _, e := range stored {
					if err := next.Apply(e); err != nil {
						return err
					}
				}
				return upsert(ctx, tx, infoOf(next))
			})
		if errors.Is(err, domain.ErrConcurrency) && attempt < maxAttempts {
			continue
		}
		if err != nil {
			return Result{}, err
		}
		info := infoOf(next)
		if r.notif != nil {
			r.notif.TenantChanged(context.WithoutCancel(ctx), info)
		}
		return Result{Info: info}, nil
	}
}

// load folds the tenant's stream.
func (r *Registry) load(ctx context.Context, tenant domain.TenantID) (domain.TenantState, error) {
	st, err := domain.NewTenantState(tenant)
	if err != nil {
		return domain.TenantState{}, err
	}
	for {
		evs, err := r.store.ReadStream(ctx, tenant, domain.TenantStreamID, st.Version(), 0)
		if err != nil {
			return domain.TenantState{}, err
		}
		for _, e := range evs {
			if err := st.Apply(e); err != nil {
				return domain.TenantState{}, fmt.Errorf("tenant %s: %w", tenant, err)
			}
		}
		if len(evs) == 0 {
			return st, nil
		}
	}
}

// upsert writes the tenants row of info.
func upsert(ctx context.Context, tx pgx.Tx, info Info) error {
	settings, err := json.Marshal(info.Settings)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO tenants (tenant_id, status, settings, version, not_before, created_at, updated_at, retained_before)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (tenant_id) DO UPDATE SET status = EXCLUDED.status, settings = EXCLUDED.settings,
			version = EXCLUDED.version, not_before = EXCLUDED.not_before, updated_at = EXCLUDED.updated_at,
			retained_before = EXCLUDED.retained_before`,
		info.Tenant.String(), string(info.Status), settings, info.Version, nullTime(info.NotBefore), info.CreatedAt,
		info.UpdatedAt, nullTime(info.RetainedBefore))
	if err != nil {
		return fmt.Errorf("write tenants row: %w", err)
	}
	return nil
}

// nullTime is t for a nullable column: nil when t is zero.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
