package export

import (
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress/snappy"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// Row is one event of a Parquet export: the envelope's fields as typed columns, the payload as a
// JSON string, and, for message events, the payload fields analysts group and join by, flattened
// into columns of their own (null for other events and for fields an event type does not have).
type Row struct {
	// TxID is the id of the transaction that wrote the event: ORDER BY tx_id, position is the
	// commit-safe order the rows were written in.
	TxID           int64     `parquet:"tx_id,delta"`
	Position       int64     `parquet:"position,delta"`
	EventID        uuid.UUID `parquet:"event_id,uuid"`
	TraceID        string    `parquet:"trace_id,dict"`
	CorrelationID  string    `parquet:"correlation_id,dict"`
	CausationID    string    `parquet:"causation_id,dict"`
	ParentEventID  *string   `parquet:"parent_event_id,optional"`
	TenantID       string    `parquet:"tenant_id,dict"`
	SourceService  string    `parquet:"source_service,dict"`
	TargetService  string    `parquet:"target_service,dict"`
	EventType      string    `parquet:"event_type,dict"`
	BizType        string    `parquet:"biz_type,dict"`
	BizID          string    `parquet:"biz_id,dict"`
	IdempotencyKey *string   `parquet:"idempotency_key,optional"`
	Version        int32     `parquet:"version"`
	OccurredAt     time.Time `parquet:"occurred_at,timestamp(microsecond)"`
	ActorType      string    `parquet:"actor_type,dict"`
	ActorID        string    `parquet:"actor_id,dict"`
	ActorKeyID     *string   `parquet:"actor_key_id,optional,dict"`
	StreamID       string    `parquet:"stream_id,dict"`
	StreamVersion  int64     `parquet:"stream_version"`
	Payload        string    `parquet:"payload,json"`

	// Message events only.
	Topic   *string    `parquet:"topic,optional,dict"`
	Seq     *int64     `parquet:"seq,optional"`
	From    *int64     `parquet:"from,optional"`
	MsgType *string    `parquet:"msg_type,optional,dict"`
	SentAt  *time.Time `parquet:"sent_at,optional,timestamp(microsecond)"`
}

// messageFields are the payload fields of message events that Row flattens.
type messageFields struct {
	Topic   string        `json:"topic"`
	Seq     int64         `json:"seq,string"`
	From    domain.UserID `json:"from"`
	MsgType string        `json:"msg_type"`
	SentAt  time.Time     `json:"sent_at"`
}

// isMessage reports whether t is an event of a conversation's message log.
func isMessage(t domain.EventType) bool {
	info, ok := domain.LookupEventType(t)
	return ok && (info.Category == domain.CategoryGroupMessage || info.Category == domain.CategoryDirectMessage)
}

// rowOf fills r from rec; the envelope is expected upcast already when the export upcasts.
func rowOf(r *Row, rec *eventstore.Record) {
	e := &rec.Envelope
	*r = Row{
		TxID: int64(rec.Cursor.TxID), Position: e.Position, EventID: e.EventID, TraceID: e.TraceID,
		CorrelationID: e.CorrelationID, CausationID: e.CausationID, TenantID: e.TenantID.String(),
		SourceService: e.SourceService, TargetService: e.TargetService, EventType: string(e.EventType),
		BizType: e.BizType, BizID: e.BizID, Version: int32(e.Version), OccurredAt: e.OccurredAt,
		ActorType: e.Actor.Type, ActorID: e.Actor.ID, StreamID: e.StreamID, StreamVersion: e.StreamVersion,
		Payload: string(e.Payload),
	}
	if e.ParentEventID != nil {
		s := e.ParentEventID.String()
		r.ParentEventID = &s
	}
	if e.IdempotencyKey != "" {
		k := e.IdempotencyKey
		r.IdempotencyKey = &k
	}
	if e.Actor.KeyID != "" {
		k := e.Actor.KeyID
		r.ActorKeyID = &k
	}
	if !isMessage(e.EventType) {
		return
	}
	var m messageFields
	if readMessageFields(e.Payload, &m) != nil {
		return // the payload column keeps what the event holds; the flattened ones stay null
	}
	if m.Topic != "" {
		r.Topic = &m.Topic
	}
	if m.Seq != 0 {
		r.Seq = &m.Seq
	}
	if m.From != 0 {
		from := m.From.Int64()
		r.From = &from
	}
	if m.MsgType != "" {
		r.MsgType = &m.MsgType
	}
	if !m.SentAt.IsZero() {
		r.SentAt = &m.SentAt
	}
}

// parquetWriter writes rows to one Parquet file.
type parquetWriter struct {
	w    *parquet.GenericWriter[Row]
	rows []Row
}

func newParquetWriter(w io.Writer, rowGroupRows int) *parquetWriter {
	return &parquetWriter{
		w: parquet.NewGenericWriter[Row](w,
			parquet.Compression(&snappy.Codec{}),
			parquet.MaxRowsPerRowGroup(int64(rowGroupRows)),
			parquet.CreatedBy("imledger", "", ""),
			parquet.KeyValueMetadata("imledger.schema", "envelope"),
		),
	}
}

func (p *parquetWriter) write(recs []eventstore.Record) error {
	if cap(p.rows) < len(recs) {
		p.rows = make([]Row, len(recs))
	}
	rows := p.rows[:len(recs)]
	for i := range recs {
		rowOf(&rows[i], &recs[i])
	}
	_, err := p.w.Write(rows)
	clear(rows) // drop the payload strings the writer copied
	return err
}

func (p *parquetWriter) close() error { return p.w.Close() }
