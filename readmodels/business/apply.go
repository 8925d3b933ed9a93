package business

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// ApplyResult is the outcome of ApplyBatch.
type ApplyResult struct {
	// Applied is how many events of the batch were new to the read model.
	Applied int
	// Invalidated lists the cache keys the new events made stale, each once, in the order they
	// were first touched. They are deleted from Redis after the commit; the projector publishes
	// them on im.cache.invalidate so other nodes can drop what they hold in process. Empty when
	// tables are not the live tables.
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

// ApplyBatch writes a batch of one tenant's events to tables in ONE transaction. It first records
// (consumerGroup, event_id) of every event in tables.Processed; events already recorded were
// applied by an earlier call and are skipped, so redelivery is harmless. Each new event is folded
// into the row of its stream (the group, the membership, both directions of the relation, the
// user profile) exactly as the domain aggregate folds it, unless the row already holds the event's
// stream version or a later one: then the event changes nothing, so a replay from any position
// and a late duplicate with a new event id are harmless too.
//
// Event types outside the business model are recorded as processed and otherwise ignored.
// Failures roll the whole batch back: an unreachable server, deadlock, or a concurrent Apply of the
// same event or row wraps domain.ErrRetryable; an event that can never apply is an *EventError;
// an unprovisioned tenant wraps domain.ErrNotFound.
//
// After the commit, when tables are DefaultTables, the cache entries the new events changed are
// invalidated (see ApplyResult). A Redis failure never fails ApplyBatch: MySQL is the truth and
// is already committed.
func (s *Store) ApplyBatch(ctx context.Context, tenant domain.TenantID, consumerGroup string, tables Tables, events []domain.Envelope) (ApplyResult, error) {
	if len(events) == 0 {
		return ApplyResult{}, nil
	}
	if consumerGroup == "" || len(consumerGroup) > maxConsumerGroupLen {
		return ApplyResult{}, fmt.Errorf("apply: consumer group must be 1 to %d bytes: %w", maxConsumerGroupLen, domain.ErrInvalid)
	}
	ops, err := decodeBatch(tenant, events)
	if err != nil {
		return ApplyResult{}, fmt.Errorf("apply: %w", err)
	}
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return ApplyResult{}, fmt.Errorf("apply: %w", err)
	}
	a := &applier{t: tables, ks: s.keyspace(tenant), seen: map[string]bool{}}
	applied, err := a.run(ctx, db, consumerGroup, ops)
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

// applier applies one batch inside one transaction and gathers the cache keys it makes stale.
type applier struct {
	tx   *sql.Tx
	t    Tables
	ks   keyspace
	keys []string
	seen map[string]bool
}

// touch records cache keys made stale by the batch.
func (a *applier) touch(keys ...string) {
	for _, k := range keys {
		if !a.seen[k] {
			a.seen[k] = true
			a.keys = append(a.keys, k)
		}
	}
}

// run applies ops in one transaction and returns how many were new.
func (a *applier) run(ctx context.Context, db *sql.DB, consumerGroup string, ops []op) (n int, err error) {
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
	fresh, err := markProcessed(ctx, tx, a.t.Processed, consumerGroup, ops)
	if err != nil {
		return 0, err
	}
	for _, o := range fresh {
		if err := a.apply(ctx, o); err != nil {
			return 0, eventErr(o, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, tenantdb.WrapErr("apply: commit", err)
	}
	return len(fresh), nil
}

// apply folds one event into its row.
func (a *applier) apply(ctx context.Context, o op) error {
	switch o.payload.(type) {
	case nil:
		return nil
	case *domain.GroupCreated, *domain.GroupProfileUpdated, *domain.GroupSettingsUpdated,
		*domain.GroupAnnouncementUpdated, *domain.GroupOwnershipTransferred, *domain.GroupDissolved,
		*domain.GroupMemberCountChanged:
		return a.applyGroup(ctx, o)
	case *domain.FriendRequested, *domain.FriendAccepted, *domain.FriendDeclined,
		*domain.FriendRemoved, *domain.UserBlocked, *domain.UserUnblocked:
		return a.applyRelation(ctx, o)
	case *domain.UserProfileUpdated:
		return a.applyUser(ctx, o)
	}
	return a.applyMember(ctx, o)
}

// eventErr attaches the event to a permanent failure; retryable ones stay as they are, because
// retrying the batch is the remedy and no single event is to blame.
func eventErr(o op, err error) error {
	if errors.Is(err, domain.ErrRetryable) {
		return err
	}
	return &EventError{Index: o.index, EventID: o.env.EventID, Err: err}
}

// insertRow inserts one row. A duplicate key means another transaction created the row after
// this one found it missing; retrying the batch then folds the event into that row.
func (a *applier) insertRow(ctx context.Context, table string, cols []string, vals []any) error {
	stmt := "INSERT INTO " + q(table) + " (" + strings.Join(cols, ", ") + ") VALUES (" + placeholders(len(cols)) + ")"
	_, err := a.tx.ExecContext(ctx, stmt, vals...)
	if tenantdb.IsMySQLError(err, errDuplicateKey) {
		return domain.Retryable("apply: insert into "+table, err)
	}
	return tenantdb.WrapErr("apply: insert into "+table, err)
}

// updateRow updates the row whose first nkey columns equal the first nkey values; the caller holds
// its lock (SELECT … FOR UPDATE).
func (a *applier) updateRow(ctx context.Context, table string, cols []string, vals []any, nkey int) error {
	sets := make([]string, 0, len(cols)-nkey)
	for _, c := range cols[nkey:] {
		sets = append(sets, c+" = ?")
	}
	where := make([]string, 0, nkey)
	for _, c := range cols[:nkey] {
		where = append(where, c+" = ?")
	}
	args := append(append(make([]any, 0, len(vals)), vals[nkey:]...), vals[:nkey]...)
	stmt := "UPDATE " + q(table) + " SET " + strings.Join(sets, ", ") + " WHERE " + strings.Join(where, " AND ")
	_, err := a.tx.ExecContext(ctx, stmt, args...)
	return tenantdb.WrapErr("apply: update "+table, err)
}

// writeRow inserts the row when it did not exist and updates it otherwise.
func (a *applier) writeRow(ctx context.Context, exists bool, table string, cols []string, vals []any, nkey int) error {
	if exists {
		return a.updateRow(ctx, table, cols, vals, nkey)
	}
	return a.insertRow(ctx, table, cols, vals)
}
