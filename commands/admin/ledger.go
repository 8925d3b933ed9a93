package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/coalesce"
	"github.com/imledger/imledger/internal/pgerr"
)

// ledger is the admin_commands table: one row per command and consumer group, claimed before the
// command runs and finished with its result, so a redelivered command is answered from it.
type ledger struct {
	pool    *pgxpool.Pool
	group   string
	owner   string
	timeout time.Duration

	claims, finishes *coalesce.Group[*ledgerCall] // the batched claims and finishes of every partition
}

func newLedger(pool *pgxpool.Pool, group, owner string, timeout time.Duration) *ledger {
	l := &ledger{pool: pool, group: group, owner: owner, timeout: timeout}
	l.claims, l.finishes = newLedgerGroup(l.claimRows), newLedgerGroup(l.finishRows)
	return l
}

// claimState is the outcome of a claim.
type claimState int

const (
	claimNew      claimState = iota // first time: run it
	claimRetry                      // this consumer's own claim, tried again
	claimTakeover                   // another consumer's abandoned claim
	claimFinished                   // answered before: publish the stored result
	claimBusy                       // another consumer (or another record of this one) is running it now
	claimReused                     // the event_id names another command (tenant, type or payload)
)

// fingerprint identifies what a command asks: its tenant, type and payload (whitespace aside),
// and who asks it when it was verified with a key (the key's identity). A record that repeats an
// event_id with another fingerprint is not the same command. A plain secret field is hashed
// redacted, so not even a digest of a password is stored; a sealed one is hashed as sealed.
func fingerprint(cmd domain.AdminCommand) []byte {
	h := sha256.New()
	h.Write([]byte(cmd.TenantID))
	h.Write([]byte{0})
	h.Write([]byte(cmd.EventType))
	h.Write([]byte{0})
	payload := cmd.Payload
	if info, ok := domain.LookupAdminCommand(domain.AdminCommandType(cmd.EventType)); ok {
		kinds, err := info.SecretFieldKinds(payload)
		plain := err != nil && len(info.SecretFields()) > 0 // not an object: it may be anything
		for _, k := range kinds {
			plain = plain || k == domain.SecretPlain || k == domain.SecretOther
		}
		if plain {
			payload, _ = info.Redact(payload)
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, payload) == nil {
		h.Write(buf.Bytes())
	} else {
		h.Write(payload)
	}
	if cmd.Actor.KeyID != "" {
		h.Write([]byte{0})
		h.Write([]byte(cmd.Actor.Type + "/" + cmd.Actor.ID))
	}
	return h.Sum(nil)
}

// claim takes the command for this consumer. own says the caller holds the command's claim
// already (it claimed it and tries again); a running claim of this consumer's owner that the
// caller does not hold is another record of the same command running on this node, so it is
// claimBusy like another consumer's. A row whose fingerprint differs from fp is claimReused. For
// claimFinished it returns the stored result; attempts counts the claims of this row, this one
// included.
func (l *ledger) claim(ctx context.Context, cmd domain.AdminCommand, fp []byte, own bool) (st claimState, stored *domain.AdminResult, attempts int, err error) {
	// The common case, a command seen for the first time, is one statement.
	tag, err := l.pool.Exec(ctx, `INSERT INTO admin_commands (consumer_group, event_id, parent_event_id, tenant_id, command_type,
			status, owner, attempts, claimed_at, fingerprint)
		VALUES ($1, $2, $3, $4, $5, 'running', $6, 1, now(), $7) ON CONFLICT DO NOTHING`,
		l.group, cmd.EventID, cmd.ParentEventID, cmd.TenantID, cmd.EventType, l.owner, fp)
	if err != nil {
		return 0, nil, 0, dbErr("claim admin command", err)
	}
	if tag.RowsAffected() == 1 {
		return claimNew, nil, 1, nil
	}
	err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		var (
			status, owner string
			result, fpRow []byte
			stale         bool
		)
		err = tx.QueryRow(ctx, `SELECT status, owner, result, attempts, claimed_at < now() - make_interval(secs => $3), fingerprint
			FROM admin_commands WHERE consumer_group = $1 AND event_id = $2 FOR UPDATE`,
			l.group, cmd.EventID, l.timeout.Seconds()).Scan(&status, &owner, &result, &attempts, &stale, &fpRow)
		if err != nil {
			return err
		}
		switch {
		case fpRow != nil && !bytes.Equal(fpRow, fp):
			st = claimReused
			return nil
		case status != "running":
			st = claimFinished
			var r domain.AdminResult
			if err := json.Unmarshal(result, &r); err != nil {
				return fmt.Errorf("stored result of %s: %w", cmd.EventID, err)
			}
			stored = &r
			return nil
		case owner == l.owner && own:
			st = claimRetry
		case stale:
			st = claimTakeover
		default:
			st = claimBusy
			return nil
		}
		attempts++
		_, err = tx.Exec(ctx, `UPDATE admin_commands SET owner = $3, attempts = $4, claimed_at = now()
			WHERE consumer_group = $1 AND event_id = $2`, l.group, cmd.EventID, l.owner, attempts)
		return err
	})
	if err != nil {
		return 0, nil, 0, dbErr("claim admin command", err)
	}
	return st, stored, attempts, nil
}

// claimNew claims, with one statement, the commands of items seen for the first time; it returns
// the ids it claimed. The others (repeats, retries, claims of other consumers) take claim. The
// claims of other partitions' batches made meanwhile go in the same statement.
func (l *ledger) claimNew(ctx context.Context, items []*item) (map[uuid.UUID]bool, error) {
	return doLedger(ctx, l.claims, items)
}

func (l *ledger) claimRows(ctx context.Context, items []*item) (map[uuid.UUID]bool, error) {
	ids := make([]uuid.UUID, len(items))
	parents := make([]*uuid.UUID, len(items))
	tenants := make([]string, len(items))
	types := make([]string, len(items))
	fps := make([][]byte, len(items))
	for i, it := range items {
		ids[i], parents[i], tenants[i], types[i], fps[i] = it.cmd.EventID, it.cmd.ParentEventID, it.cmd.TenantID, it.cmd.EventType, it.fp
	}
	rows, err := l.pool.Query(ctx, `INSERT INTO admin_commands (consumer_group, event_id, parent_event_id, tenant_id, command_type,
			status, owner, attempts, claimed_at, fingerprint)
		SELECT $1, u.id, u.parent, u.tenant, u.typ, 'running', $2, 1, now(), u.fp
		FROM unnest($3::uuid[], $4::uuid[], $5::text[], $6::text[], $7::bytea[]) AS u(id, parent, tenant, typ, fp)
		ON CONFLICT DO NOTHING RETURNING event_id`, l.group, l.owner, ids, parents, tenants, types, fps)
	if err != nil {
		return nil, dbErr("claim admin commands", err)
	}
	claimed := make(map[uuid.UUID]bool, len(items))
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, dbErr("claim admin commands", err)
		}
		claimed[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("claim admin commands", err)
	}
	return claimed, nil
}

// finishBatch records the results of items, commands this consumer holds, with one round trip
// (one implicit transaction). It returns the ids whose claim was taken over meanwhile (the other
// consumer answers them). Each row is updated by its whole primary key: a join with the ids as
// an array let PostgreSQL keep a plan made while the table was small, which found the rows by
// consumer_group alone and read every command of the group each time (1.7 ms a command after
// 4,000, growing with the table). The finishes of other partitions' batches made meanwhile go in
// the same round trip.
func (l *ledger) finishBatch(ctx context.Context, items []*item) (map[uuid.UUID]bool, error) {
	return doLedger(ctx, l.finishes, items)
}

func (l *ledger) finishRows(ctx context.Context, items []*item) (map[uuid.UUID]bool, error) {
	b := &pgx.Batch{}
	for _, it := range items {
		body, err := json.Marshal(it.res)
		if err != nil {
			return nil, err
		}
		b.Queue(`UPDATE admin_commands SET status = $3, reason = $4, result = $5::json, finished_at = now()
			WHERE consumer_group = $1 AND event_id = $2 AND owner = $6 AND status = 'running'`,
			l.group, it.cmd.EventID, it.res.Status, it.res.Reason, string(body), l.owner)
	}
	res := l.pool.SendBatch(ctx, b)
	lost := map[uuid.UUID]bool{}
	for _, it := range items {
		tag, err := res.Exec()
		if err != nil {
			_ = res.Close()
			return nil, dbErr("finish admin commands", err)
		}
		if tag.RowsAffected() == 0 {
			lost[it.cmd.EventID] = true
		}
	}
	if err := res.Close(); err != nil {
		return nil, dbErr("finish admin commands", err)
	}
	return lost, nil
}

// release gives up this consumer's claims of commands it never started, so whoever gets them
// after a rebalance or restart runs them at once instead of after the claim timeout.
func (l *ledger) release(ctx context.Context, ids []uuid.UUID) error {
	_, err := l.pool.Exec(ctx, `DELETE FROM admin_commands
		WHERE consumer_group = $1 AND event_id = ANY($2::uuid[]) AND owner = $3 AND status = 'running'`, l.group, ids, l.owner)
	if err != nil {
		return dbErr("release admin commands", err)
	}
	return nil
}

// attempts returns how often the command was claimed; 0 when it never was.
func (l *ledger) attempts(ctx context.Context, id uuid.UUID) (int, error) {
	var n int
	err := l.pool.QueryRow(ctx, `SELECT attempts FROM admin_commands WHERE consumer_group = $1 AND event_id = $2`,
		l.group, id).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, dbErr("read admin command", err)
	}
	return n, nil
}

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
