package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/domain"
)

// ledger is the admin_commands table: one row per command and consumer group, claimed before the
// command runs and finished with its result, so a redelivered command is answered from it.
type ledger struct {
	pool    *pgxpool.Pool
	group   string
	owner   string
	timeout time.Duration
}

// claimState is the outcome of a claim.
type claimState int

const (
	claimNew      claimState = iota // first time: run it
	claimRetry                      // this consumer's own claim, tried again
	claimTakeover                   // another consumer's abandoned claim
	claimFinished                   // answered before: publish the stored result
	claimBusy                       // another consumer is running it now
)

// claim takes the command for this consumer. For claimFinished it returns the stored result;
// attempts counts the claims of this row, this one included.
func (l *ledger) claim(ctx context.Context, cmd domain.AdminCommand) (st claimState, stored *domain.AdminResult, attempts int, err error) {
	// The common case, a command seen for the first time, is one statement.
	tag, err := l.pool.Exec(ctx, `INSERT INTO admin_commands (consumer_group, event_id, parent_event_id, tenant_id, command_type,
			status, owner, attempts, claimed_at)
		VALUES ($1, $2, $3, $4, $5, 'running', $6, 1, now()) ON CONFLICT DO NOTHING`,
		l.group, cmd.EventID, cmd.ParentEventID, cmd.TenantID, cmd.EventType, l.owner)
	if err != nil {
		return 0, nil, 0, dbErr("claim admin command", err)
	}
	if tag.RowsAffected() == 1 {
		return claimNew, nil, 1, nil
	}
	err = pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		var (
			status, owner string
			result        []byte
			stale         bool
		)
		err = tx.QueryRow(ctx, `SELECT status, owner, result, attempts, claimed_at < now() - make_interval(secs => $3)
			FROM admin_commands WHERE consumer_group = $1 AND event_id = $2 FOR UPDATE`,
			l.group, cmd.EventID, l.timeout.Seconds()).Scan(&status, &owner, &result, &attempts, &stale)
		if err != nil {
			return err
		}
		switch {
		case status != "running":
			st = claimFinished
			var r domain.AdminResult
			if err := json.Unmarshal(result, &r); err != nil {
				return fmt.Errorf("stored result of %s: %w", cmd.EventID, err)
			}
			stored = &r
			return nil
		case owner == l.owner:
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

// finish records the final result of a command this consumer holds. It reports false when the
// claim was taken over meanwhile (the other consumer answers).
func (l *ledger) finish(ctx context.Context, id uuid.UUID, res domain.AdminResult) (bool, error) {
	body, err := json.Marshal(res)
	if err != nil {
		return false, err
	}
	tag, err := l.pool.Exec(ctx, `UPDATE admin_commands SET status = $4, reason = $5, result = $6, finished_at = now()
		WHERE consumer_group = $1 AND event_id = $2 AND owner = $3 AND status = 'running'`,
		l.group, id, l.owner, res.Status, res.Reason, body)
	if err != nil {
		return false, dbErr("finish admin command", err)
	}
	return tag.RowsAffected() == 1, nil
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

// dbErr wraps a PostgreSQL failure for op as retryable unless it is a plain SQL error.
func dbErr(op string, err error) error {
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", op, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		for _, class := range []string{"08", "40", "53", "57"} {
			if strings.HasPrefix(pgErr.Code, class) {
				return domain.Retryable(op, err)
			}
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	return domain.Retryable(op, err)
}
