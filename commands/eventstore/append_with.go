package eventstore

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/coalesce"
)

// TxHook runs inside an append's transaction after its events were inserted, with the envelopes
// as stored. It keeps a table that mirrors a stream's current state (the tenant registry, account
// governance) exactly in step with the events: both commit or neither does.
type TxHook func(ctx context.Context, tx pgx.Tx, stored []domain.Envelope) error

// AppendWith is Append with hook (nil: none) run in the same transaction after the insert; an error of hook
// rolls everything back and is returned wrapped (a transient database failure as
// domain.ErrRetryable). Errors and guarantees are otherwise Append's.
func (s *Store) AppendWith(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope, hook TxHook) ([]domain.Envelope, error) {
	const op = "append events"
	if len(events) == 0 {
		return nil, nil
	}
	out, args, err := s.prepareAppend(tenant, streamID, expectedVersion, events)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		positions, err := s.insertAndNotify(ctx, tx, appendSQL, args)
		if err != nil {
			return err
		}
		if len(positions) == 0 {
			return versionMismatch(ctx, tx, tenant, streamID)
		}
		for i := range out {
			out[i].Position = positions[out[i].EventID]
		}
		if hook != nil {
			if err := hook(ctx, tx, out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, appendErr(op, tenant, streamID, expectedVersion, len(events), err)
	}
	return out, nil
}

// StatementHook builds the statement AppendWithStatement runs with an append's insert, from the
// envelopes as they are about to be stored (without Position). The statement sees the inserted
// rows as "appended" (columns event_id, position), which is empty when the stream was not at the
// expected version: it must then change nothing (e.g. INSERT … SELECT … WHERE EXISTS (SELECT 1
// FROM appended)). Its parameters are numbered from $1.
type StatementHook func(prepared []domain.Envelope) (sql string, args []any, err error)

// AppendWithStatement is AppendWith for a hook that is one SQL statement: the insert and the
// statement are one statement, sent with the notification in one round trip as one implicit
// transaction, where AppendWith takes four (begin, insert, hook, commit). The calls made while
// one is in flight go together in the next round trip, one transaction: one commit for many
// appends (a conflict of one of them, or any error, and each is tried again alone). A caller
// waits for its round whatever its ctx: a round has the latest deadline of its calls.
// Errors and guarantees are Append's; an error of the statement is returned as the append's.
func (s *Store) AppendWithStatement(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope, hook StatementHook) ([]domain.Envelope, error) {
	const op = "append events"
	if len(events) == 0 {
		return nil, nil
	}
	out, args, err := s.prepareAppend(tenant, streamID, expectedVersion, events)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	hookSQL, hookArgs, err := hook(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	call := &statementAppend{stream: tenant.String() + "/" + streamID, sql: s.withStatement(hookSQL, len(args)), args: append(args, hookArgs...)}
	if err := s.statementAppends.Do(ctx, call); err != nil {
		call.err = err // its round panicked
	}
	positions, err := call.positions, call.err
	if err == nil && len(positions) == 0 {
		err = versionMismatch(ctx, s.pool, tenant, streamID)
	}
	if err != nil {
		return nil, appendErr(op, tenant, streamID, expectedVersion, len(events), err)
	}
	for i := range out {
		out[i].Position = positions[out[i].EventID]
	}
	return out, nil
}

var paramRe = regexp.MustCompile(`\$([0-9]+)`)

// withStatement is appendSQL joined by hookSQL (one more common table expression), whose parameters are shifted past appendSQL's
// (by of them); the result is kept per hookSQL (a program has a few), so no append parses it
// again.
func (s *Store) withStatement(hookSQL string, by int) string {
	if sql, ok := s.statements.Load(hookSQL); ok {
		return sql.(string)
	}
	shifted := paramRe.ReplaceAllStringFunc(hookSQL, func(p string) string {
		n, _ := strconv.Atoi(p[1:])
		return "$" + strconv.Itoa(n+by)
	})
	sql := "WITH " + appendCTEs + ", hooked AS (" + shifted + ") SELECT event_id, position FROM appended"
	s.statements.Store(hookSQL, sql)
	return sql
}

// FindCaused reports whether tenant has an event whose causation_id is causationID: the events of
// an admin command carry the command's event id there.
func (s *Store) FindCaused(ctx context.Context, tenant domain.TenantID, causationID string) (bool, error) {
	if causationID == "" {
		return false, nil
	}
	var found bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE tenant_id = $1 AND causation_id = $2)`,
		tenant.String(), causationID).Scan(&found)
	if err != nil {
		return false, wrapErr("find caused events", err)
	}
	return found, nil
}

// statementAppend is one AppendWithStatement call in a round of Store.statementAppends.
type statementAppend struct {
	stream    string // tenant/stream: a round writes its streams in this order
	sql       string
	args      []any
	positions map[[16]byte]int64
	err       error
}

// newStatementAppends coalesces the AppendWithStatement calls of s: the statements of a round
// are sent together with one notification, outside a transaction, so they are one implicit
// transaction; each sees the rows of those before it (two appends to one stream at the same
// expected version: the second inserts nothing and reports the mismatch). A round writes its
// streams in their order (calls of one stream in the order they came), so rounds of two nodes
// never wait for each other's rows in opposite orders. When the round fails (a unique violation
// of one statement aborts them all), each call runs alone.
func newStatementAppends(s *Store) *coalesce.Group[*statementAppend] {
	alone := func(ctx context.Context, c *statementAppend) {
		c.positions, c.err = s.insertAndNotify(ctx, s.pool, c.sql, c.args)
	}
	return &coalesce.Group[*statementAppend]{Run: func(ctx context.Context, round []*statementAppend) {
		if len(round) == 1 {
			alone(ctx, round[0])
			return
		}
		slices.SortStableFunc(round, func(a, b *statementAppend) int { return strings.Compare(a.stream, b.stream) })
		b := &pgx.Batch{}
		for _, c := range round {
			b.Queue(c.sql, c.args...)
		}
		b.Queue(notifySQL, s.cfg.NotifyChannel)
		res := s.pool.SendBatch(ctx, b)
		err := func() error {
			for _, c := range round {
				rows, err := res.Query()
				if err != nil {
					return err
				}
				if c.positions, err = scanPositions(rows); err != nil {
					return err
				}
			}
			_, err := res.Exec()
			return err
		}()
		if cerr := res.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			return
		}
		for _, c := range round {
			alone(ctx, c)
		}
	}}
}
