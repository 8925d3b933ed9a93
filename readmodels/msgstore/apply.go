package msgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// maxConsumerGroupLen is the width of im_processed_events.consumer_group.
const maxConsumerGroupLen = 128

// processedChunk is the most processed rows one statement inserts or looks up.
const processedChunk = 500

// errDuplicateKey is ER_DUP_ENTRY.
const errDuplicateKey = 1062

// Apply writes a batch of events of one tenant to tables in ONE transaction and returns how many
// of them were new. It first records (consumerGroup, event_id) of every event in tables.Processed;
// events already recorded were applied by an earlier call and are skipped, so redelivery is
// harmless. The new events take effect as if applied one by one in batch order (see groupOps):
//
//   - sent: the message row is inserted (the batch's sent events become multi-row INSERTs; a
//     row already holding the topic and seq is kept). The sender's read mark moves to
//     the seq (their own messages are read); in a 1:1 topic the receiver gets a read-mark row,
//     read_seq unchanged, so the conversation shows in their unread list.
//   - recalled: status "recalled", content, head and mentions cleared, recalled_at/by set, version
//     bumped; a second recall changes nothing.
//   - edited: content and version = EditVersion, only if EditVersion is greater than the stored
//     version and the message is not recalled.
//   - deleted_for_user: a delete-for-me row.
//   - read_marked: read_seq and recv_seq move forward only (GREATEST).
//
// Event types outside the message model are recorded as processed and otherwise ignored.
// Failures roll the whole batch back: an unreachable server, deadlock or a concurrent Apply of the
// same event wraps domain.ErrRetryable; an event that can never apply is an *EventError (see
// there); an unprovisioned tenant wraps domain.ErrNotFound.
func (s *Store) Apply(ctx context.Context, tenant domain.TenantID, consumerGroup string, tables Tables, events []domain.Envelope) (applied int, err error) {
	return s.ApplyIf(ctx, tenant, consumerGroup, tables, events, nil)
}

// ApplyIf is Apply with a last word for the caller: ok, unless nil, is called once the batch is
// written and before it commits, and an error from it rolls the batch back and is returned as
// it is. A caller that must check something elsewhere before the batch may take effect (the
// projector asks Postgres whether any of the conversations is parked behind a dead letter) runs
// the check while the batch is written instead of before. ok runs while the transaction holds
// its row locks, so it should not take long.
func (s *Store) ApplyIf(ctx context.Context, tenant domain.TenantID, consumerGroup string, tables Tables, events []domain.Envelope, ok func(context.Context) error) (applied int, err error) {
	if len(events) == 0 {
		return 0, nil
	}
	if consumerGroup == "" || len(consumerGroup) > maxConsumerGroupLen {
		return 0, fmt.Errorf("apply: consumer group must be 1 to %d bytes: %w", maxConsumerGroupLen, domain.ErrInvalid)
	}
	ops, err := decodeBatch(tenant, events)
	if err != nil {
		return 0, fmt.Errorf("apply: %w", err)
	}
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return 0, fmt.Errorf("apply: %w", err)
	}
	if n, err := s.applyScript(ctx, db, tables, consumerGroup, ops, ok); !errors.Is(err, errNoScript) {
		return n, err
	}
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, tenantdb.WrapErr("apply: begin", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	fresh, err := markProcessed(ctx, tx, tables.Processed, consumerGroup, ops)
	if err != nil {
		return 0, err
	}
	if err := applyOps(ctx, tx, tables, fresh, insertMessages); err != nil {
		return 0, err
	}
	if ok != nil {
		if err := ok(ctx); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, tenantdb.WrapErr("apply: commit", err)
	}
	return len(fresh), nil
}

// markProcessed records the processed rows of ops and returns the ops not recorded before. The
// common case, a batch seen for the first time, costs one multi-row INSERT; only when that hits a
// duplicate (a redelivery) does it read which events were done and insert the rest. InnoDB undoes
// just the failed statement, so the transaction carries on. Batches larger than one statement
// read first, so no earlier statement's rows can be mistaken for old ones.
func markProcessed(ctx context.Context, tx *sql.Tx, table, group string, ops []op) ([]op, error) {
	if len(ops) <= processedChunk {
		err := insertProcessed(ctx, tx, table, group, ops)
		if err == nil {
			return ops, nil
		}
		if !tenantdb.IsMySQLError(err, errDuplicateKey) {
			return nil, tenantdb.WrapErr("apply: record processed events", err)
		}
	}
	done, err := processedAmong(ctx, tx, table, group, ops)
	if err != nil {
		return nil, err
	}
	fresh := make([]op, 0, len(ops))
	for _, o := range ops {
		if !done[o.env.EventID] {
			fresh = append(fresh, o)
		}
	}
	err = insertProcessed(ctx, tx, table, group, fresh)
	if tenantdb.IsMySQLError(err, errDuplicateKey) {
		// Another Apply recorded the same event after our read: retrying sees it as done.
		return nil, domain.Retryable("apply: record processed events", err)
	}
	if err != nil {
		return nil, tenantdb.WrapErr("apply: record processed events", err)
	}
	return fresh, nil
}

// insertProcessed inserts one processed row per op and returns the server's error as it is.
func insertProcessed(ctx context.Context, tx *sql.Tx, table, group string, ops []op) error {
	for _, st := range processedStmts(table, group, ops) {
		if _, err := tx.ExecContext(ctx, st.query, st.args...); err != nil {
			return err
		}
	}
	return nil
}

// processedStmts returns the inserts of one processed row per op.
func processedStmts(table, group string, ops []op) []stmt {
	now := time.Now().UTC()
	var out []stmt
	for start := 0; start < len(ops); start += processedChunk {
		chunk := ops[start:min(start+processedChunk, len(ops))]
		args := make([]any, 0, 3*len(chunk))
		for _, o := range chunk {
			args = append(args, group, o.env.EventID[:], now)
		}
		out = append(out, stmt{query: "INSERT INTO " + q(table) + " (consumer_group, event_id, processed_at) VALUES " + rowPlaceholders(len(chunk), 3), args: args})
	}
	return out
}

// processedAmong returns which of ops are recorded as processed for group.
func processedAmong(ctx context.Context, tx *sql.Tx, table, group string, ops []op) (map[uuid.UUID]bool, error) {
	done := make(map[uuid.UUID]bool, len(ops))
	for start := 0; start < len(ops); start += processedChunk {
		chunk := ops[start:min(start+processedChunk, len(ops))]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, group)
		for _, o := range chunk {
			args = append(args, o.env.EventID[:])
		}
		rows, err := tx.QueryContext(ctx, "SELECT event_id FROM "+q(table)+" WHERE consumer_group = ? AND event_id IN ("+placeholders(len(chunk))+")", args...)
		if err != nil {
			return nil, tenantdb.WrapErr("apply: read processed events", err)
		}
		for rows.Next() {
			var id []byte
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, tenantdb.WrapErr("apply: read processed events", err)
			}
			if u, err := uuid.FromBytes(id); err == nil {
				done[u] = true
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, tenantdb.WrapErr("apply: read processed events", err)
		}
	}
	return done, nil
}

// applyOps applies ops with as few statements as it can: ops are gathered into groups of one
// action (groupOps) and each group is written at once, the sent events of a group with write,
// its read marks as one upsert, its deletions as one insert; recalls and edits stay one
// statement each. The result is that of applying ops one by one in batch order.
func applyOps(ctx context.Context, tx *sql.Tx, tables Tables, ops []op, write messageWriter) error {
	for _, g := range groupOps(ops) {
		var err error
		switch g.action {
		case domain.ActionSent:
			err = insertSent(ctx, tx, tables, g.ops, write)
		case domain.ActionReadMarked:
			err = upsertReadMarks(ctx, tx, tables.ReadMarks, readMarkRows(g.ops))
		case domain.ActionDeleted:
			err = insertDeletions(ctx, tx, tables.Deletions, g.ops)
		default:
			for _, o := range g.ops {
				if o.action == domain.ActionRecalled {
					err = applyRecall(ctx, tx, tables, o)
				} else {
					err = applyEdit(ctx, tx, tables, o)
				}
				if err != nil {
					return eventErr(o, err)
				}
			}
		}
		if err != nil && len(g.ops) == 1 && g.action != domain.ActionSent {
			return eventErr(g.ops[0], err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readMarkRows returns the read-mark rows of read_marked ops, in order.
func readMarkRows(ops []op) []markRow {
	rows := make([]markRow, len(ops))
	for i, o := range ops {
		rows[i] = markRow{user: o.mark.User, topic: o.topic.String(), read: o.mark.ReadSeq, recv: o.mark.RecvSeq, at: o.at(o.mark.At)}
	}
	return rows
}

// opGroup is ops of one action that are written together.
type opGroup struct {
	action domain.MessageAction
	ops    []op
}

// groupOps orders ops into groups of one action each without changing the outcome. Every write
// of the message model touches rows of one conversation only (messages, read marks and
// deletions are all keyed by topic), so ops of different topics commute; ops of one topic keep
// their order. An op joins the newest group of its action unless its topic has an op in a
// later group, in which case it opens a new group. A live batch with an event from each of many
// conversations becomes one group per action; a run of sent events stays one group. Ops of
// event types outside the message model are left out.
func groupOps(ops []op) []opGroup {
	var groups []opGroup
	newest := map[domain.MessageAction]int{} // index of the newest group of each action
	topicAt := map[string]int{}              // index of the group holding a topic's latest op
	for _, o := range ops {
		if o.action == "" {
			continue
		}
		topic := o.topic.String()
		i, ok := newest[o.action]
		if last, seen := topicAt[topic]; !ok || seen && i < last {
			groups = append(groups, opGroup{action: o.action})
			i = len(groups) - 1
			newest[o.action] = i
		}
		groups[i].ops = append(groups[i].ops, o)
		topicAt[topic] = i
	}
	return groups
}

// eventErr attaches the event to a permanent failure; retryable ones stay as they are, because
// retrying the batch is the remedy and no single event is to blame.
func eventErr(o op, err error) error {
	if errors.Is(err, domain.ErrRetryable) {
		return err
	}
	return &EventError{Index: o.index, EventID: o.env.EventID, Err: err}
}

// placeholders returns "?, ?, …" with n marks.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// stmt is one SQL statement and its arguments.
type stmt struct {
	query string
	args  []any
}

// execStmts runs stmts in tx in order; a failure is wrapped with what (tenantdb.WrapErr).
func execStmts(ctx context.Context, tx *sql.Tx, stmts []stmt, what string) error {
	for _, st := range stmts {
		if _, err := tx.ExecContext(ctx, st.query, st.args...); err != nil {
			return tenantdb.WrapErr(what, err)
		}
	}
	return nil
}

// rowPlaceholders returns n rows of width marks: "(?, ?), (?, ?)".
func rowPlaceholders(n, width int) string {
	row := "(" + placeholders(width) + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}
