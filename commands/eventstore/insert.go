package eventstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/imledger/imledger/domain"
)

// insertColumns are the columns an append writes, in the order of eventArrays.args.
const insertColumns = `event_id, tenant_id, stream_id, stream_version, event_type, version,
	trace_id, correlation_id, causation_id, parent_event_id, source_service, target_service,
	biz_type, biz_id, idempotency_key, actor_type, actor_id, occurred_at, payload, actor_key_id`

// keysColumns are the columns of event_keys, the table that keeps the unique keys of events
// across its partitions (migrations/postgres/00020_events_partitioned.sql); every insert into
// events writes them in the same statement.
const keysColumns = `tenant_id, stream_id, stream_version, event_id, idempotency_key`

// expiringExpr computes the partition column expiring of a row: message events are kept only as
// long as their tenant's retention allows, in monthly partitions (docs/retention.md); read marks
// are a user's state, not history, and stay.
const expiringExpr = `(event_type LIKE 'message.%' AND event_type NOT LIKE 'message.%.read_marked.%')`

// unnestRows turns the 20 array parameters $1..$20 of eventArrays.args into rows of insertColumns.
const unnestRows = `unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::integer[],
	$7::text[], $8::text[], $9::text[], $10::uuid[], $11::text[], $12::text[],
	$13::text[], $14::text[], $15::text[], $16::text[], $17::text[], $18::timestamptz[], $19::jsonb[], $20::text[])`

// eventArrays holds a batch of envelopes column by column, so one INSERT … SELECT FROM unnest
// writes all of them with 20 parameters whatever the batch size.
type eventArrays struct {
	eventID        []pgtype.UUID
	tenantID       []string
	streamID       []string
	streamVersion  []int64
	eventType      []string
	version        []int32
	traceID        []string
	correlationID  []string
	causationID    []string
	parentEventID  []pgtype.UUID
	sourceService  []string
	targetService  []string
	bizType        []string
	bizID          []string
	idempotencyKey []pgtype.Text
	actorType      []string
	actorID        []string
	occurredAt     []time.Time
	payload        [][]byte
	actorKeyID     []string
}

func newEventArrays(n int) *eventArrays {
	return &eventArrays{
		eventID: make([]pgtype.UUID, 0, n), tenantID: make([]string, 0, n), streamID: make([]string, 0, n),
		streamVersion: make([]int64, 0, n), eventType: make([]string, 0, n), version: make([]int32, 0, n),
		traceID: make([]string, 0, n), correlationID: make([]string, 0, n), causationID: make([]string, 0, n),
		parentEventID: make([]pgtype.UUID, 0, n), sourceService: make([]string, 0, n),
		targetService: make([]string, 0, n), bizType: make([]string, 0, n), bizID: make([]string, 0, n),
		idempotencyKey: make([]pgtype.Text, 0, n), actorType: make([]string, 0, n),
		actorID: make([]string, 0, n), occurredAt: make([]time.Time, 0, n), payload: make([][]byte, 0, n),
		actorKeyID: make([]string, 0, n),
	}
}

// add appends one validated envelope. An empty idempotency key is stored as NULL.
func (a *eventArrays) add(e domain.Envelope) {
	a.eventID = append(a.eventID, pgtype.UUID{Bytes: e.EventID, Valid: true})
	a.tenantID = append(a.tenantID, e.TenantID.String())
	a.streamID = append(a.streamID, e.StreamID)
	a.streamVersion = append(a.streamVersion, e.StreamVersion)
	a.eventType = append(a.eventType, string(e.EventType))
	a.version = append(a.version, int32(e.Version))
	a.traceID = append(a.traceID, e.TraceID)
	a.correlationID = append(a.correlationID, e.CorrelationID)
	a.causationID = append(a.causationID, e.CausationID)
	parent := pgtype.UUID{}
	if e.ParentEventID != nil {
		parent = pgtype.UUID{Bytes: *e.ParentEventID, Valid: true}
	}
	a.parentEventID = append(a.parentEventID, parent)
	a.sourceService = append(a.sourceService, e.SourceService)
	a.targetService = append(a.targetService, e.TargetService)
	a.bizType = append(a.bizType, e.BizType)
	a.bizID = append(a.bizID, e.BizID)
	a.idempotencyKey = append(a.idempotencyKey, pgtype.Text{String: e.IdempotencyKey, Valid: e.IdempotencyKey != ""})
	a.actorType = append(a.actorType, e.Actor.Type)
	a.actorID = append(a.actorID, e.Actor.ID)
	a.occurredAt = append(a.occurredAt, e.OccurredAt)
	a.payload = append(a.payload, e.Payload)
	a.actorKeyID = append(a.actorKeyID, e.Actor.KeyID)
}

// args returns the parameters $1..$20 of unnestRows.
func (a *eventArrays) args() []any {
	return []any{
		a.eventID, a.tenantID, a.streamID, a.streamVersion, a.eventType, a.version,
		a.traceID, a.correlationID, a.causationID, a.parentEventID, a.sourceService, a.targetService,
		a.bizType, a.bizID, a.idempotencyKey, a.actorType, a.actorID, a.occurredAt, a.payload,
		a.actorKeyID,
	}
}

// maxInt32 bounds the schema version, an integer column.
const maxInt32 = 1<<31 - 1

// prepare validates e for storage and returns it as it will be stored: occurred_at in UTC with
// microsecond precision, the resolution of timestamptz.
func prepare(e domain.Envelope) (domain.Envelope, error) {
	var zeroID [16]byte
	switch {
	case e.EventID == zeroID:
		return e, invalid("event_id", "required", "")
	case e.TenantID.IsZero():
		return e, invalid("tenant_id", "required", "")
	case e.StreamID == "":
		return e, invalid("stream_id", "required", "")
	case e.StreamVersion <= 0:
		return e, invalid("stream_version", "bad_format", "positive")
	case e.EventType == "":
		return e, invalid("event_type", "required", "")
	case e.Version < 0 || e.Version > maxInt32:
		return e, invalid("version", "bad_format", "a 32-bit non-negative number")
	case e.OccurredAt.IsZero():
		return e, invalid("occurred_at", "required", "")
	case len(e.Payload) == 0 || !json.Valid(e.Payload):
		return e, invalid("payload", "bad_json", "a JSON document")
	}
	e.OccurredAt = e.OccurredAt.UTC().Truncate(time.Microsecond)
	e.Position = 0
	return e, nil
}

// checkBatchSize rejects a batch above Config.MaxBatch.
func (s *Store) checkBatchSize(n int) error {
	if n > s.cfg.MaxBatch {
		return invalid("events", "too_many", fmt.Sprintf("at most %d per append, got %d", s.cfg.MaxBatch, n))
	}
	return nil
}
