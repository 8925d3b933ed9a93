package msgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// MaxConsumerGroupLen is the longest consumer group name Apply accepts.
const MaxConsumerGroupLen = 128

// Apply writes a batch of events of one tenant to tables in ONE transaction and returns how many
// it applied (repeats of an event id within the batch count once). consumerGroup names the
// projector applying the batch (1 to MaxConsumerGroupLen bytes). Every write is idempotent by
// itself, so an event applied again (a redelivery, a replay, a rebuild's catch-up) changes
// nothing and no record of applied events is kept: a message row that exists is kept, recalls
// and edits compare versions, read marks only move forward, a deletion that exists is kept. The
// events take effect as if applied one by one in batch order (see groupOps):
//
//   - sent: the message row is inserted (the batch's sent events become multi-row INSERTs; a
//     row already holding the topic and seq is kept). A message whose content the server refuses
//     (tenantdb.IsDataError: JSON it will not hold, nested too deep, bad UTF-8) is stored as a
//     placeholder: status "blocked", no content, head or mentions, and in the group table
//     has_risk 1 and audit_status "reject", so the conversation's history stays complete and
//     its later events apply. The sender's read mark moves to
//     the seq (their own messages are read); in a 1:1 topic the receiver gets a read-mark row,
//     read_seq unchanged, so the conversation shows in their unread list.
//   - recalled: status "recalled", content, head and mentions cleared, recalled_at/by set, version
//     bumped; a second recall changes nothing.
//   - edited: content and version = EditVersion and status "normal", only if EditVersion is
//     greater than the stored version and the message is not recalled. New content the server
//     refuses makes the message a blocked placeholder at that version instead.
//   - deleted_for_user: a delete-for-me row.
//   - read_marked: read_seq and recv_seq move forward only (GREATEST).
//   - seq_skipped: a marker row (status "skipped", no sender or content) takes the seq unless a
//     message holds it; history never shows it.
//
// Then the watermark of every topic that got a message or a marker is raised (see Watermark).
//
// Event types outside the message model are ignored (and counted as applied).
// Failures roll the whole batch back: an unreachable server or a deadlock wraps
// domain.ErrRetryable; an event that can never apply is an *EventError (see
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
	if consumerGroup == "" || len(consumerGroup) > MaxConsumerGroupLen {
		return 0, fmt.Errorf("apply: consumer group must be 1 to %d bytes: %w", MaxConsumerGroupLen, domain.ErrInvalid)
	}
	ops, err := decodeBatch(tenant, events)
	if err != nil {
		return 0, fmt.Errorf("apply: %w", err)
	}
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return 0, fmt.Errorf("apply: %w", err)
	}
	if n, err := s.applyScript(ctx, db, tables, ops, ok); !errors.Is(err, errNoScript) {
		return n, err
	}
	err = inTx(ctx, db, "apply", func(tx *sql.Tx) error {
		if err := applyOps(ctx, tx, tables, ops, insertMessages, true); err != nil {
			return err
		}
		if ok != nil {
			return ok(ctx)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(ops), nil
}

// inTx runs fn in a READ COMMITTED transaction of db and commits unless fn fails; fn's error is
// returned as it is, a failure to begin or commit is wrapped with what.
func inTx(ctx context.Context, db *sql.DB, what string, fn func(*sql.Tx) error) (err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return tenantdb.WrapErr(what+": begin", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return tenantdb.WrapErr(what+": commit", err)
	}
	return nil
}

// applyOps applies ops with as few statements as it can: ops are gathered into groups of one
// action (groupOps) and each group is written at once, the sent events of a group with write,
// its read marks as one upsert, its deletions and seq-skip markers as one insert each; recalls
// and edits stay one statement each. The result is that of applying ops one by one in batch
// order. With watermarks, the watermarks of the topics that got a message or marker are raised
// last (a bulk load computes them once at the end instead).
func applyOps(ctx context.Context, tx *sql.Tx, tables Tables, ops []op, write messageWriter, watermarks bool) error {
	for _, g := range groupOps(ops) {
		var err error
		switch g.action {
		case domain.ActionSent:
			err = insertSent(ctx, tx, tables, g.ops, write)
		case domain.ActionSeqSkipped:
			err = execStmts(ctx, tx, markerStmts(tables, g.ops), "apply: insert seq-skip markers")
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
	if watermarks {
		return execStmts(ctx, tx, watermarkStmts(tables, ops, readmodels.Millis(time.Now())), "apply: raise watermarks")
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
	// First the group of each op, then each group's ops in one allocation: an op is large, and
	// growing the slices op by op copied them over and over (a fifth of a rebuild's CPU).
	var groups []opGroup
	of := make([]int, len(ops))
	var sizes []int
	newest := map[domain.MessageAction]int{} // index of the newest group of each action
	topicAt := map[string]int{}              // index of the group holding a topic's latest op
	for k, o := range ops {
		of[k] = -1
		if o.action == "" {
			continue
		}
		topic := o.topic.String()
		i, ok := newest[o.action]
		if last, seen := topicAt[topic]; !ok || seen && i < last {
			groups = append(groups, opGroup{action: o.action})
			sizes = append(sizes, 0)
			i = len(groups) - 1
			newest[o.action] = i
		}
		of[k] = i
		sizes[i]++
		topicAt[topic] = i
	}
	for i := range groups {
		groups[i].ops = make([]op, 0, sizes[i])
	}
	for k, i := range of {
		if i >= 0 {
			groups[i].ops = append(groups[i].ops, ops[k])
		}
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

// stmt is one SQL statement and its arguments.
type stmt struct {
	Query string
	Args  []any
}

// execStmts runs stmts in tx in order; a failure is wrapped with what (tenantdb.WrapErr).
func execStmts(ctx context.Context, tx *sql.Tx, stmts []stmt, what string) error {
	for _, st := range stmts {
		if _, err := tx.ExecContext(ctx, st.Query, st.Args...); err != nil {
			return tenantdb.WrapErr(what, err)
		}
	}
	return nil
}
