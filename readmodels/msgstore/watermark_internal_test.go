package msgstore

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
)

// Raising a watermark walks the topic's index from the batch's lowest seq, not from the topic's
// first row: with 3,000 messages in the topic, the statements of a batch of ten read a few
// index entries. A watermark below the batch's seqs (rows written by other means) is still
// raised, by the walk from the watermark.
func TestWatermarkWalkStartsAtTheBatch(t *testing.T) {
	t.Parallel()
	ctx, r, tenant, db := tenantDB(t)
	s, tables := NewStore(r), DefaultTables()
	const topic, total = "grp7", 3000
	var events []domain.Envelope
	for seq := int64(1); seq <= total; seq++ {
		events = append(events, rmtest.Sent(t, tenant, topic, seq, 5, "m"))
	}
	for start := 0; start < total; start += 500 {
		if _, err := s.Apply(ctx, tenant, "g", tables, events[start:start+500]); err != nil {
			t.Fatal(err)
		}
	}
	last, err := decodeBatch(tenant, events[total-10:])
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	for _, c := range []struct {
		from     int64 // the watermark before the batch's statements
		mostRead int64 // index entries they may read
	}{
		{total - 10, 50}, // the batch of seqs 2,991-3,000 has just been written
		{5, total},       // rows below the batch written without raising the watermark
	} {
		if _, err := conn.ExecContext(ctx, "UPDATE "+q(tables.Watermarks)+" SET watermark = ? WHERE topic = ?", c.from, topic); err != nil {
			t.Fatal(err)
		}
		before := readNext(ctx, t, conn)
		for _, st := range watermarkStmts(tables, last, time.Now().UTC()) {
			if _, err := conn.ExecContext(ctx, st.Query, st.Args...); err != nil {
				t.Fatalf("%s: %v", st.Query, err)
			}
		}
		read := readNext(ctx, t, conn) - before
		w, err := s.Watermark(ctx, tenant, tables, rmtest.Topic(t, topic))
		if err != nil {
			t.Fatal(err)
		}
		if w != total || read > c.mostRead {
			t.Fatalf("from %d: watermark %d after the batch (want %d), %d index entries read (at most %d)", c.from, w, total, read, c.mostRead)
		}
	}
}

// readNext returns the session's Handler_read_next: index entries read in order.
func readNext(ctx context.Context, t *testing.T, conn *sql.Conn) int64 {
	t.Helper()
	var name string
	var n int64
	if err := conn.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Handler_read_next'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}
