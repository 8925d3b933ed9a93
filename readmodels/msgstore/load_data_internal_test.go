package msgstore

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// tenantDB returns a test context, a router, a fresh tenant of it and the tenant's database.
func tenantDB(t *testing.T) (context.Context, *tenantdb.Router, domain.TenantID, *sql.DB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	r := rmtest.Router(t)
	tenant := rmtest.Tenant(t, r)
	db, err := r.DB(ctx, tenant)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, r, tenant, db
}

func sentOps(t *testing.T, tenant domain.TenantID, topic string, n int) []op {
	t.Helper()
	var events []domain.Envelope
	for seq := int64(1); seq <= int64(n); seq++ {
		events = append(events, rmtest.Sent(t, tenant, topic, seq, domain.UserID(1+seq%3), "a\tb\nc\\d"))
	}
	ops, err := decodeBatch(tenant, events)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// LOAD DATA, not the INSERT fallback, writes a long run, and a row that is already there is
// skipped as a duplicate without making the load unclean.
func TestLoadMessagesTakesTheFastPath(t *testing.T) {
	t.Parallel()
	ctx, _, tenant, db := tenantDB(t)
	ops := sentOps(t, tenant, "grp3", 2*loadDataMinRows)
	ops = append(ops, ops[7]) // the same message again, as a second event would carry it
	tables := DefaultTables()
	held := 0 // rows holding the content so far
	for round, want := range []int{len(ops) - 1, 0} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := loadMessages(ctx, tx, tables.GroupMessages, groupColumns, ops, groupRow); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM im_group_messages WHERE content = ?", `"a\tb\nc\\d"`).Scan(&n); err != nil || n-held != want {
			t.Fatalf("round %d: %d new rows hold the content, want %d (%v)", round, n-held, want, err)
		}
		held = n
	}
}

// However the driver sizes its reads, the reader yields the same rows.
func TestTSVReaderSmallReads(t *testing.T) {
	t.Parallel()
	ops := sentOps(t, domain.MustTenantID("tsv"), "grp1", 40)
	whole, err := io.ReadAll(&tsvReader{ops: ops, row: groupRow})
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(whole, []byte{'\n'}); got != 40 {
		t.Fatalf("%d rows, want 40", got)
	}
	if !bytes.Contains(whole, []byte(`"a\\tb\\nc\\\\d"`)) || !bytes.Contains(whole, []byte("\t\\N\t")) {
		t.Fatalf("escapes or NULLs missing:\n%s", whole)
	}
	r := &tsvReader{ops: ops, row: groupRow}
	var pieces bytes.Buffer
	p := make([]byte, 7)
	for {
		n, err := r.Read(p)
		pieces.Write(p[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(pieces.Bytes(), whole) {
		t.Fatal("7-byte reads differ from one read")
	}
}
