package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
)

// tableSchema is a read model's tables as its readmodels package drives them (its Model): T names
// them, with a suffix for a rebuild's fresh copies, which it creates like the live ones, swaps in
// and drops.
type tableSchema[T any] interface {
	Tables(suffix string) T
	CreateLike(ctx context.Context, db *sql.DB, suffix string) error
	Drop(ctx context.Context, db *sql.DB, suffix string) error
	Swap(ctx context.Context, db *sql.DB, suffix string) error
}

// tableStore is what a tableModel needs of its read model's store (PushStore, TokenStore,
// FileStore): the fold of events into tables T, and the summary S of tables T.
type tableStore[T, S any] interface {
	ApplyBatch(ctx context.Context, tenant domain.TenantID, tables T, events []domain.Envelope) (int, error)
	Checksum(ctx context.Context, tenant domain.TenantID, tables T) (S, error)
}

// tableModel is a read model kept in a fixed set of tables by one store of a readmodels package
// (push-settings, action-tokens, files-refs): its live projection, and the ReadModel its
// TableRebuilder drives. Each read model says only what is its own: its names, topics and event
// types, its tables, and which summary is which live table's.
type tableModel[T, S any] struct {
	tableSchema[T]
	name   string // replay name
	what   string // what the rebuild's errors call it, e.g. "push"
	group  string // consumer group when none is given
	topics []string
	accept func(domain.EventType) bool
	store  tableStore[T, S]
	parts  func(S) map[string]readmodels.TableSummary // by live table name
}

// projection returns the live projection of m: the accepted events of its topics go to the live
// tables, version-guarded by the store. group "" means m.group. Unknown tenants are
// dead-lettered as for MessagesMySQL.
func (m tableModel[T, S]) projection(group string) Projection {
	if group == "" {
		group = m.group
	}
	live := m.Tables("")
	return Projection{
		Name:          m.name,
		ConsumerGroup: group,
		Topics:        m.topics,
		Accept:        m.accept,
		Applier: ApplierFunc(func(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
			n, err := m.store.ApplyBatch(ctx, tenant, live, events)
			return n, readModelErr(err)
		}),
	}
}

// rebuilder returns the TableRebuilder skeleton over m.
func (m tableModel[T, S]) rebuilder(events EventReader, tenants TenantDatabases, log *slog.Logger) (*TableRebuilder[readmodels.TableSummary], error) {
	if m.store == nil {
		return nil, fmt.Errorf("projections: %s rebuild: a store is required", m.what)
	}
	return NewTableRebuilder[readmodels.TableSummary](m, events, tenants, log)
}

func (m tableModel[T, S]) Projection() string { return m.name }

func (m tableModel[T, S]) Filter(t domain.TenantID) domain.EventFilter {
	return domain.EventFilter{Tenant: t, EventTypes: acceptedTypes(m.accept)}
}

func (m tableModel[T, S]) Apply(ctx context.Context, t domain.TenantID, suffix string, events []domain.Envelope) (int, error) {
	return m.store.ApplyBatch(ctx, t, m.Tables(suffix), events)
}

func (m tableModel[T, S]) Checksum(ctx context.Context, t domain.TenantID, suffix string) (map[string]readmodels.TableSummary, error) {
	sum, err := m.store.Checksum(ctx, t, m.Tables(suffix))
	if err != nil {
		return nil, err
	}
	return m.parts(sum), nil
}

// readModelErr classifies an error of a read model's apply as businessErr does: an event that can
// never be applied is permanent, an unprovisioned tenant is ErrUnknownTenant, transient failures
// pass through.
func readModelErr(err error) error {
	if err == nil || errors.Is(err, domain.ErrRetryable) {
		return err
	}
	var ee *readmodels.EventError
	if errors.As(err, &ee) && errors.Is(err, domain.ErrInvalid) {
		return permanent(ReasonBadEvent, err)
	}
	if errors.Is(err, domain.ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrUnknownTenant, err)
	}
	return err
}
