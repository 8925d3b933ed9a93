package eventstore

import (
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/imledger/imledger/domain"
)

// pageScanner scans rows of "tx_id, " + envelopeColumns for bulk reads (ScanCommitted) with as
// few allocations as a row allows: the scan targets are reused from row to row, text columns
// that repeat (tenant, type, stream, actor, …) are interned, and payloads are copied into large
// shared buffers instead of one allocation each. An export of millions of events spends most of
// its own CPU here.
type pageScanner struct {
	txID                    uint64
	position, streamVersion int64
	version                 int32
	eventID, parentID       pgtype.UUID
	idemKey                 pgtype.Text
	occurredAt              pgtype.Timestamptz
	text                    [13]internedText // tenant, stream, type, trace, correlation, causation, source, target, biz type, biz id, actor type, actor id, actor key id
	payload                 slabBytes
	dest                    []any

	tenantText string
	tenant     domain.TenantID
}

// Indexes of pageScanner.text.
const (
	colTenant = iota
	colStream
	colType
	colTrace
	colCorrelation
	colCausation
	colSource
	colTarget
	colBizType
	colBizID
	colActorType
	colActorID
	colActorKeyID
)

func newPageScanner() *pageScanner {
	s := &pageScanner{}
	strs := map[string]string{}
	for i := range s.text {
		s.text[i].strs = strs
	}
	t := &s.text
	s.dest = []any{&s.txID,
		&s.position, &s.eventID, &t[colTenant], &t[colStream], &s.streamVersion, &t[colType], &s.version,
		&t[colTrace], &t[colCorrelation], &t[colCausation], &s.parentID, &t[colSource], &t[colTarget],
		&t[colBizType], &t[colBizID], &s.idemKey, &t[colActorType], &t[colActorID], &s.occurredAt, &s.payload, &t[colActorKeyID]}
	return s
}

// scan reads one row into a Record.
func (s *pageScanner) scan(rows pgx.Rows) (Record, error) {
	if err := rows.Scan(s.dest...); err != nil {
		return Record{}, err
	}
	t := &s.text
	if t[colTenant].v != s.tenantText || s.tenant.IsZero() {
		tn, err := domain.NewTenantID(t[colTenant].v)
		if err != nil {
			return Record{}, fmt.Errorf("stored event at position %d: %w", s.position, err)
		}
		s.tenantText, s.tenant = t[colTenant].v, tn
	}
	e := domain.Envelope{
		EventID: s.eventID.Bytes, TraceID: t[colTrace].v, CorrelationID: t[colCorrelation].v, CausationID: t[colCausation].v,
		TenantID: s.tenant, SourceService: t[colSource].v, TargetService: t[colTarget].v, EventType: domain.EventType(t[colType].v),
		BizType: t[colBizType].v, BizID: t[colBizID].v, IdempotencyKey: s.idemKey.String, Version: int(s.version),
		OccurredAt: s.occurredAt.Time.UTC(), Actor: domain.Actor{Type: t[colActorType].v, ID: t[colActorID].v, KeyID: t[colActorKeyID].v},
		StreamID: t[colStream].v, StreamVersion: s.streamVersion, Position: s.position, Payload: s.payload.v,
	}
	if s.parentID.Valid {
		p := uuid.UUID(s.parentID.Bytes)
		e.ParentEventID = &p
	}
	return Record{Cursor: Cursor{TxID: s.txID, Position: s.position}, Envelope: e}, nil
}

// maxInterned bounds the strings a pageScanner keeps; past it the table starts over.
const maxInterned = 1 << 16

// internedText is a scan target for text that returns the same string for equal values.
type internedText struct {
	v    string
	strs map[string]string
}

// ScanBytes implements pgtype.BytesScanner; b is driver memory, valid only during the call.
func (t *internedText) ScanBytes(b []byte) error {
	if string(b) == t.v { // most columns repeat the previous row's value (or are empty)
		return nil
	}
	if s, ok := t.strs[string(b)]; ok { // no allocation for the lookup
		t.v = s
		return nil
	}
	if len(t.strs) >= maxInterned {
		clear(t.strs)
	}
	s := string(b)
	t.strs[s] = s
	t.v = s
	return nil
}

// slabSize is the size of the buffers payloads are copied into.
const slabSize = 1 << 20

// slabBytes is a scan target that copies each value into a shared buffer and hands out a
// capacity-limited slice of it; a value larger than a quarter of a buffer gets its own.
type slabBytes struct {
	v    []byte
	slab []byte
}

// ScanBytes implements pgtype.BytesScanner.
func (s *slabBytes) ScanBytes(b []byte) error {
	if b == nil {
		s.v = nil
		return nil
	}
	if len(b) > slabSize/4 {
		s.v = append([]byte(nil), b...)
		return nil
	}
	if cap(s.slab)-len(s.slab) < len(b) {
		s.slab = make([]byte, 0, slabSize)
	}
	start := len(s.slab)
	s.slab = append(s.slab, b...)
	s.v = s.slab[start:len(s.slab):len(s.slab)]
	return nil
}
