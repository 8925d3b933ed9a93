package rest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/pgerr"
)

// ClaimState is the outcome of claiming an Idempotency-Key.
type ClaimState int

// The claim outcomes.
const (
	// Claimed: the request runs, and Complete or Release must follow.
	Claimed ClaimState = iota + 1
	// Replay: the key finished with the same request; Claim returned its stored answer.
	Replay
	// Reused: the key belongs to another request (another method, path or body).
	Reused
	// Running: the same request holds the key and has not finished.
	Running
)

// Claim is the outcome of IdempotencyStore.Claim.
type Claim struct {
	State  ClaimState
	Status int    // Replay: the stored status
	Body   []byte // Replay: the stored answer
}

// IdempotencyKey names one key of one user.
type IdempotencyKey struct {
	Tenant domain.TenantID
	User   domain.UserID
	Key    string
}

// IdempotencyStore keeps Idempotency-Key records; *PostgresIdempotency implements it.
type IdempotencyStore interface {
	// Claim claims key for a request with hash, or reports why it cannot: the key finished
	// (Replay, with the answer), belongs to another request (Reused) or is held (Running). A
	// record past its expiry, or one held unfinished for longer than pending, is claimed anew.
	Claim(ctx context.Context, key IdempotencyKey, hash []byte, ttl, pending time.Duration) (Claim, error)
	// Complete stores the answer of a claimed key and returns the body as stored, which is what
	// replays will send.
	Complete(ctx context.Context, key IdempotencyKey, hash []byte, status int, body []byte) ([]byte, error)
	// Release gives up a claimed key without storing an answer, so a retry runs again.
	Release(ctx context.Context, key IdempotencyKey, hash []byte) error
}

// PostgresIdempotency stores Idempotency-Key records in the http_idempotency table of the event
// store's database (migrations/postgres).
type PostgresIdempotency struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

var _ IdempotencyStore = (*PostgresIdempotency)(nil)

// NewPostgresIdempotency returns a store over pool; logger (nil discards) hears failed purges.
func NewPostgresIdempotency(pool *pgxpool.Pool, logger *slog.Logger) (*PostgresIdempotency, error) {
	if pool == nil {
		return nil, errors.New("rest: idempotency store needs a pool")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &PostgresIdempotency{pool: pool, log: logger}, nil
}

// claimSQL inserts the claim, or takes over a record that expired or whose request was
// abandoned (the same request, unfinished for longer than $7 seconds).
const claimSQL = `INSERT INTO http_idempotency (tenant_id, user_id, key, request_hash, created_at, expires_at)
VALUES ($1, $2, $3, $4, now(), now() + make_interval(secs => $5))
ON CONFLICT (tenant_id, user_id, key) DO UPDATE
SET request_hash = EXCLUDED.request_hash, status_code = NULL, response_body = NULL,
    created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
WHERE http_idempotency.expires_at <= now()
   OR (http_idempotency.status_code IS NULL AND http_idempotency.request_hash = $4
       AND http_idempotency.created_at < now() - make_interval(secs => $6))
RETURNING true`

// Claim implements IdempotencyStore.
func (s *PostgresIdempotency) Claim(ctx context.Context, k IdempotencyKey, hash []byte, ttl, pending time.Duration) (Claim, error) {
	for range 3 {
		var claimed bool
		err := s.pool.QueryRow(ctx, claimSQL, k.Tenant.String(), int64(k.User), k.Key, hash, ttl.Seconds(), pending.Seconds()).Scan(&claimed)
		if err == nil {
			return Claim{State: Claimed}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Claim{}, pgErr("claim idempotency key", err)
		}
		var (
			stored []byte
			status *int
			body   *string
		)
		err = s.pool.QueryRow(ctx, `SELECT request_hash, status_code, `+storedBody+` FROM http_idempotency
			WHERE tenant_id = $1 AND user_id = $2 AND key = $3`, k.Tenant.String(), int64(k.User), k.Key).Scan(&stored, &status, &body)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			continue // released meanwhile
		case err != nil:
			return Claim{}, pgErr("read idempotency key", err)
		case string(stored) != string(hash):
			return Claim{State: Reused}, nil
		case status == nil || body == nil:
			return Claim{State: Running}, nil
		}
		return Claim{State: Replay, Status: *status, Body: []byte(*body)}, nil
	}
	return Claim{State: Running}, nil
}

// storedBody reads response_body as the answer's bytes. An answer is stored as a jsonb string
// holding its exact text, so replays are byte-equal to the first answer and keep its compact
// encoding and key order (a jsonb object would come back in PostgreSQL's formatting). Rows
// stored as objects by earlier versions come back as jsonb text and are compacted on replay.
const storedBody = `CASE WHEN jsonb_typeof(response_body) = 'string' THEN response_body #>> '{}' ELSE response_body::text END`

// Complete implements IdempotencyStore. The body is stored as it is (see storedBody) and
// returned as stored.
func (s *PostgresIdempotency) Complete(ctx context.Context, k IdempotencyKey, hash []byte, status int, body []byte) ([]byte, error) {
	var stored string
	err := s.pool.QueryRow(ctx, `UPDATE http_idempotency SET status_code = $5, response_body = to_jsonb($6::text)
		WHERE tenant_id = $1 AND user_id = $2 AND key = $3 AND request_hash = $4 AND status_code IS NULL
		RETURNING `+storedBody, k.Tenant.String(), int64(k.User), k.Key, hash, status, string(body)).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("complete idempotency key: the claim was taken over: %w", domain.ErrConcurrency)
	}
	if err != nil {
		return nil, pgErr("complete idempotency key", err)
	}
	return []byte(stored), nil
}

// Release implements IdempotencyStore.
func (s *PostgresIdempotency) Release(ctx context.Context, k IdempotencyKey, hash []byte) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM http_idempotency
		WHERE tenant_id = $1 AND user_id = $2 AND key = $3 AND request_hash = $4 AND status_code IS NULL`,
		k.Tenant.String(), int64(k.User), k.Key, hash)
	return pgErr("release idempotency key", err)
}

// Purge deletes up to limit expired records and returns how many it deleted.
func (s *PostgresIdempotency) Purge(ctx context.Context, limit int) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM http_idempotency WHERE ctid IN (
		SELECT ctid FROM http_idempotency WHERE expires_at <= now() LIMIT $1)`, limit)
	if err != nil {
		return 0, pgErr("purge idempotency keys", err)
	}
	return tag.RowsAffected(), nil
}

// RunPurge deletes expired records every interval (in batches of 10 000 until none is left)
// until ctx ends, and returns nil then. Failures are logged and retried at the next tick.
// Expired records are also taken over when their key is used again, so purging only bounds
// the table's size.
func (s *PostgresIdempotency) RunPurge(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return errors.New("rest: purge interval must be positive")
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for {
			n, err := s.Purge(ctx, 10000)
			if err != nil {
				if ctx.Err() == nil {
					s.log.WarnContext(ctx, "purging expired idempotency keys failed", "err", err)
				}
				break
			}
			if n < 10000 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// pgErr wraps a PostgreSQL failure: a failure to reach or use the database is retryable, an
// error the server answered with is not, and a cancelled context stays as it is.
func pgErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if pgerr.Transient(err) {
		return domain.Retryable(op, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}
