package eventstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/coalesce"
)

// Store is the PostgreSQL event store. It expects the schema of migrations.UpPostgres. A Store is
// safe for concurrent use; it holds no state besides the pool and its configuration.
type Store struct {
	pool       *pgxpool.Pool
	cfg        Config
	statements sync.Map // AppendWithStatement's SQL by its hook's statement

	statementAppends *coalesce.Group[*statementAppend]
}

// New returns a Store over pool. It fails when pool is nil or cfg is invalid after defaults are
// applied; it does not contact the database.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("eventstore: pool is required")
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("eventstore: invalid config: %w", err)
	}
	s := &Store{pool: pool, cfg: cfg}
	s.statementAppends = newStatementAppends(s)
	return s, nil
}

// envelopeColumns are the stored envelope fields in the order scanEnvelope reads them.
const envelopeColumns = `position, event_id, tenant_id, stream_id, stream_version, event_type, version,
	trace_id, correlation_id, causation_id, parent_event_id, source_service, target_service,
	biz_type, biz_id, idempotency_key, actor_type, actor_id, occurred_at, payload, actor_key_id`

// envelopeScanner scans rows of envelopeColumns. It remembers the last tenant so a page of one
// tenant's events validates the tenant id once.
type envelopeScanner struct {
	tenantText string
	tenant     domain.TenantID
}

// scan reads one row made of the columns behind extra followed by envelopeColumns.
func (s *envelopeScanner) scan(row pgx.Row, extra ...any) (domain.Envelope, error) {
	var (
		e         domain.Envelope
		eventID   pgtype.UUID
		parentID  pgtype.UUID
		tenant    string
		eventType string
		idemKey   pgtype.Text
		payload   []byte
	)
	dest := make([]any, 0, len(extra)+21)
	dest = append(dest, extra...)
	dest = append(dest,
		&e.Position, &eventID, &tenant, &e.StreamID, &e.StreamVersion, &eventType, &e.Version,
		&e.TraceID, &e.CorrelationID, &e.CausationID, &parentID, &e.SourceService, &e.TargetService,
		&e.BizType, &e.BizID, &idemKey, &e.Actor.Type, &e.Actor.ID, &e.OccurredAt, &payload, &e.Actor.KeyID)
	if err := row.Scan(dest...); err != nil {
		return domain.Envelope{}, err
	}
	if tenant != s.tenantText || s.tenant.IsZero() {
		t, err := domain.NewTenantID(tenant)
		if err != nil {
			return domain.Envelope{}, fmt.Errorf("stored event at position %d: %w", e.Position, err)
		}
		s.tenantText, s.tenant = tenant, t
	}
	e.TenantID = s.tenant
	e.EventID = eventID.Bytes
	if parentID.Valid {
		p := uuid.UUID(parentID.Bytes)
		e.ParentEventID = &p
	}
	e.EventType = domain.EventType(eventType)
	e.IdempotencyKey = idemKey.String
	e.OccurredAt = e.OccurredAt.UTC()
	e.Payload = payload
	return e, nil
}

// collectEnvelopes scans every row of rows, upcast to the current version of its event type
// (domain.Upcast), and closes them.
func collectEnvelopes(rows pgx.Rows) ([]domain.Envelope, error) {
	defer rows.Close()
	var (
		out []domain.Envelope
		sc  envelopeScanner
	)
	for rows.Next() {
		e, err := sc.scanCurrent(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// scanCurrent is scan followed by domain.Upcast: what every read but the outbox tail returns.
// The tail (ReadCommitted) returns events as stored, because the relay publishes them so.
func (s *envelopeScanner) scanCurrent(row pgx.Row, extra ...any) (domain.Envelope, error) {
	e, err := s.scan(row, extra...)
	if err != nil {
		return e, err
	}
	return domain.Upcast(e)
}

// inTx runs fn in a READ COMMITTED transaction, committing when fn returns nil.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}
