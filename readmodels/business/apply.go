package business

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// MaxConsumerGroupLen is the longest consumer group name ApplyBatch accepts.
const MaxConsumerGroupLen = 128

// ApplyResult is the outcome of ApplyBatch.
type ApplyResult struct {
	// Applied is how many events of the batch were applied (repeats of an event id within the
	// batch count once; an event applied before counts again and changes nothing).
	Applied int
	// Invalidated lists the cache keys whose content the batch changed, each once: a row's
	// entries are listed when what they hold for it differs before and after the batch. They are
	// deleted from Redis after the commit; the projector publishes them on im.cache.invalidate so
	// other nodes can drop what they hold in process. Empty when tables are not the live tables.
	Invalidated []string
	// CacheErr is nil when Redis accepted every invalidation. Otherwise the MySQL transaction is
	// still committed and the keys are kept and retried before the next invalidation; until then
	// an entry cached before the failure can be stale for at most Config.CacheTTL.
	CacheErr error
}

// Apply is ApplyBatch returning only how many events were new; the projector's applier shape.
func (s *Store) Apply(ctx context.Context, tenant domain.TenantID, consumerGroup string, tables Tables, events []domain.Envelope) (applied int, err error) {
	r, err := s.ApplyBatch(ctx, tenant, consumerGroup, tables, events)
	return r.Applied, err
}

// ApplyBatch writes a batch of one tenant's events to tables in ONE transaction. consumerGroup
// names the projector applying it (1 to MaxConsumerGroupLen bytes). Each event is folded into the
// row of its stream (the group, the membership, both directions of the relation, the user
// profile) exactly as the domain aggregate folds it, unless the row already holds the event's
// stream version or a later one: then the event changes nothing, so a redelivery, a replay from
// any position and a late duplicate with a new event id are harmless, and no record of applied
// events is kept.
//
// Event types outside the business model are ignored (and counted as applied).
// Failures roll the whole batch back: an unreachable server, deadlock, or a concurrent Apply of the
// same row wraps domain.ErrRetryable; an event that can never apply is an *EventError;
// an unprovisioned tenant wraps domain.ErrNotFound.
//
// After the commit, when tables are DefaultTables, the cache entries the new events changed are
// invalidated (see ApplyResult). A Redis failure never fails ApplyBatch: MySQL is the truth and
// is already committed.
func (s *Store) ApplyBatch(ctx context.Context, tenant domain.TenantID, consumerGroup string, tables Tables, events []domain.Envelope) (ApplyResult, error) {
	if len(events) == 0 {
		return ApplyResult{}, nil
	}
	if consumerGroup == "" || len(consumerGroup) > MaxConsumerGroupLen {
		return ApplyResult{}, fmt.Errorf("apply: consumer group must be 1 to %d bytes: %w", MaxConsumerGroupLen, domain.ErrInvalid)
	}
	ops, err := decodeBatch(tenant, events)
	if err != nil {
		return ApplyResult{}, fmt.Errorf("apply: %w", err)
	}
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return ApplyResult{}, fmt.Errorf("apply: %w", err)
	}
	a := newApplier(tables, s.keyspace(tenant))
	applied, err := a.run(ctx, db, ops)
	if err != nil {
		return ApplyResult{}, err
	}
	res := ApplyResult{Applied: applied}
	if tables == DefaultTables() {
		res.Invalidated = a.keys
		res.CacheErr = s.invalidate(ctx, tenant, a.keys)
	}
	return res, nil
}

// run applies ops in one transaction and returns how many it applied: it locks and reads every row
// the events touch (one statement per table and chunk), folds the events into those rows in
// batch order, and writes back the rows that changed.
func (a *applier) run(ctx context.Context, db *sql.DB, ops []op) (n int, err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, tenantdb.WrapErr("apply: begin", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	a.tx = tx
	if err := a.load(ctx, ops); err != nil {
		return 0, err
	}
	for _, o := range ops {
		if err := a.fold(o); err != nil {
			return 0, eventErr(o, err)
		}
	}
	if err := a.write(ctx); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, tenantdb.WrapErr("apply: commit", err)
	}
	a.staleKeys()
	return len(ops), nil
}

// eventErr attaches the event to a permanent failure; retryable ones stay as they are, because
// retrying the batch is the remedy and no single event is to blame.
func eventErr(o op, err error) error {
	if errors.Is(err, domain.ErrRetryable) {
		return err
	}
	return &EventError{Index: o.index, EventID: o.env.EventID, Err: err}
}
