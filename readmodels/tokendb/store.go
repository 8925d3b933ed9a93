package tokendb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/eventdecode"
	"github.com/imledger/imledger/readmodels/internal/tablefold"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// States of a token's row.
const (
	StateActive   = "active"
	StateConsumed = "consumed"
	StateRevoked  = "revoked"
)

// Tables names the tables of the read model. The projection and the queries use DefaultTables; a
// rebuild writes DefaultTables().WithSuffix("_rebuild") and then swaps it in (Model).
type Tables struct {
	Tokens string // im_action_tokens
}

// DefaultTables returns the live table names created by the migrations.
func DefaultTables() Tables { return Tables{Tokens: "im_action_tokens"} }

// WithSuffix returns t with s appended to every name, e.g. "_rebuild".
func (t Tables) WithSuffix(s string) Tables { return Tables{Tokens: t.Tokens + s} }

func (t Tables) list() []string { return []string{t.Tokens} }

// model is the action token read model as tablefold drives it: rows written before tokens were
// events (version 0) are in no stream and are carried into a rebuild's fresh table.
var model = tablefold.Model[Tables]{Pkg: "tokendb", Live: DefaultTables(), Names: Tables.list, Decode: decodeOne, PreLog: true,
	Columns: []string{"token_hash, token_id, action, subject, state, created_by, " +
		"COALESCE(consumed_by, ''), created_at, expires_at, COALESCE(finished_at, ''), version"}}

// Model returns the read model's table as a rebuild drives it: a fresh copy with a suffix created
// like the live one (with the rows older than the log), swapped in, dropped.
func Model() tablefold.Model[Tables] { return model }

// Validate checks that every name is 1 to 60 characters of [A-Za-z0-9_].
func (t Tables) Validate() error { return model.Validate(t) }

// Store reads and writes im_action_tokens of each tenant's database. It is safe for concurrent
// use. Errors wrap domain.ErrRetryable when MySQL is unreachable.
type Store struct {
	router *tenantdb.Router
}

// New returns a Store over the tenant databases of router.
func New(router *tenantdb.Router) *Store { return &Store{router: router} }

// EventError says which event of a batch could not be applied; Err wraps domain.ErrInvalid for
// an event that can never be applied.
type EventError = readmodels.EventError

// Statements of the fold: a row changes only for an event newer than the one that wrote it (the
// version is assigned last: MySQL evaluates the assignments in order), so applying an event
// again, or an older one after a newer, changes nothing.
const (
	issueStmt = "INSERT INTO %s (token_hash, token_id, action, subject, state, created_by, consumed_by, created_at, expires_at, finished_at, version)" +
		" VALUES (?, ?, ?, ?, 'active', ?, NULL, ?, ?, NULL, ?) ON DUPLICATE KEY UPDATE" +
		" state = IF(version < VALUES(version), 'active', state)," +
		" consumed_by = IF(version < VALUES(version), NULL, consumed_by)," +
		" finished_at = IF(version < VALUES(version), NULL, finished_at)," +
		" version = GREATEST(version, VALUES(version))"
	stateStmt = "UPDATE %s SET state = ?, consumed_by = ?, finished_at = ?, version = ? WHERE token_id = ? AND version < ?"
)

// decodeOne decodes an action token event and checks it against its stream.
func decodeOne(tables Tables) func(int, domain.Envelope) (tablefold.Op, error) {
	q := tableset.Quote(tables.Tokens)
	return func(_ int, env domain.Envelope) (tablefold.Op, error) {
		v := env.StreamVersion
		var (
			id    string
			state string
			by    any
			at    time.Time
		)
		switch env.EventType {
		case domain.EventActionTokenIssued:
			var p domain.ActionTokenIssued
			if err := check(env, &p, func() string { return p.TokenID }); err != nil {
				return tablefold.Op{}, err
			}
			if len(p.TokenSHA256) != 64 || p.Action == "" || len(p.Subject) > 128 {
				return tablefold.Op{}, eventdecode.Bad("payload", "a 64-digit hash, an action and a subject of at most 128 bytes")
			}
			return tablefold.Op{Stmt: fmt.Sprintf(issueStmt, q), Args: []any{p.TokenSHA256, p.TokenID, p.Action, p.Subject,
				p.CreatedBy.Int64(), readmodels.Millis(p.IssuedAt), readmodels.Millis(p.ExpiresAt), v}}, nil
		case domain.EventActionTokenConsumed:
			var p domain.ActionTokenConsumed
			if err := check(env, &p, func() string { return p.TokenID }); err != nil {
				return tablefold.Op{}, err
			}
			id, state, by, at = p.TokenID, StateConsumed, p.By.Int64(), p.ConsumedAt
		case domain.EventActionTokenRevoked:
			var p domain.ActionTokenRevoked
			if err := check(env, &p, func() string { return p.TokenID }); err != nil {
				return tablefold.Op{}, err
			}
			id, state, at = p.TokenID, StateRevoked, p.RevokedAt
		case domain.EventActionTokenUnconsumed:
			var p domain.ActionTokenUnconsumed
			if err := check(env, &p, func() string { return p.TokenID }); err != nil {
				return tablefold.Op{}, err
			}
			return tablefold.Op{Stmt: fmt.Sprintf(stateStmt, q), Args: []any{StateActive, nil, nil, v, p.TokenID, v}}, nil
		default:
			return tablefold.Op{}, nil
		}
		return tablefold.Op{Stmt: fmt.Sprintf(stateStmt, q), Args: []any{state, by, readmodels.Millis(at), v, id, v}}, nil
	}
}

// check decodes env into p and checks that env is on the stream of the token id that id, called
// after decoding, returns.
func check(env domain.Envelope, p any, id func() string) error {
	if err := env.Decode(p); err != nil {
		return eventdecode.Bad("payload", err.Error())
	}
	if want := domain.ActionTokenStreamID(id()); id() == "" || env.StreamID != want {
		return eventdecode.Bad("stream_id", fmt.Sprintf("%s names stream %q, the payload belongs to %q", env.EventType, env.StreamID, want))
	}
	return nil
}

// ApplyBatch folds one tenant's action token events into tables in one transaction and returns
// how many changed a row. Other event types are ignored.
//
// Errors: an *EventError wrapping domain.ErrInvalid for an event that can never be applied;
// domain.ErrNotFound (wrapped) for a tenant without a database; domain.ErrRetryable when MySQL is
// unreachable.
func (s *Store) ApplyBatch(ctx context.Context, tenant domain.TenantID, tables Tables, events []domain.Envelope) (int, error) {
	return model.Apply(ctx, s.router, tenant, tables, events)
}

// Apply is ApplyBatch to the live tables.
func (s *Store) Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	return s.ApplyBatch(ctx, tenant, DefaultTables(), events)
}

// Checksum summarises tables.Tokens so two copies (the live table and a rebuild) can be compared:
// each row hashes every column the events decide.
func (s *Store) Checksum(ctx context.Context, tenant domain.TenantID, tables Tables) (readmodels.TableSummary, error) {
	sums, err := model.Checksum(ctx, s.router, tenant, tables)
	if err != nil {
		return readmodels.TableSummary{}, err
	}
	return sums[0], nil
}

// Row is a token's row.
type Row struct {
	TokenHash  string
	TokenID    string
	Action     string
	Subject    string
	State      string
	CreatedBy  domain.UserID
	ConsumedBy domain.UserID // 0 unless consumed
	CreatedAt  time.Time
	ExpiresAt  time.Time
	FinishedAt time.Time // zero unless consumed or revoked
	Version    int64     // 0: written before tokens were events
}

// Find returns the row of the token whose hash is hash or whose id is id (either may be empty),
// and whether there is one.
func (s *Store) Find(ctx context.Context, tenant domain.TenantID, hash, id string) (Row, bool, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return Row{}, false, err
	}
	var (
		r              Row
		by, consumedBy sql.NullInt64
		finished       sql.NullTime
	)
	err = db.QueryRowContext(ctx, "SELECT token_hash, token_id, action, subject, state, created_by, consumed_by, created_at, expires_at,"+
		" finished_at, version FROM im_action_tokens WHERE token_hash = ? OR token_id = ? LIMIT 1", hash, id).
		Scan(&r.TokenHash, &r.TokenID, &r.Action, &r.Subject, &r.State, &by, &consumedBy, &r.CreatedAt, &r.ExpiresAt, &finished, &r.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, false, nil
	}
	if err != nil {
		return Row{}, false, tenantdb.WrapErr("tokendb: find", err)
	}
	r.CreatedBy, r.ConsumedBy, r.FinishedAt = domain.UserID(by.Int64), domain.UserID(consumedBy.Int64), finished.Time
	return r, true, nil
}
