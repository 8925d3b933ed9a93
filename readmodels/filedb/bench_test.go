package filedb_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/filedb"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// BenchmarkRecordWrite compares the file service's record write after file.created.v1: the
// INSERT it ran before the record was a read model of the events ("insert") and the apply of the
// event it runs now ("apply").
func BenchmarkRecordWrite(b *testing.B) {
	ctx := testenv.Context(b)
	testenv.MySQLServer(b)
	r, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	tenant := domain.MustTenantID(testenv.UniqueName("fbench"))
	testenv.DropMySQLDatabasesAtCleanup(b, r.DatabaseName(tenant))
	if err := r.Provision(ctx, tenant); err != nil {
		b.Fatal(err)
	}
	db, err := r.DB(ctx, tenant)
	if err != nil {
		b.Fatal(err)
	}
	store := filedb.New(r)
	now := time.Now().UTC().Truncate(time.Millisecond)
	b.Run("insert", func(b *testing.B) {
		for b.Loop() {
			id := uuid.Must(uuid.NewV7()).String()
			if _, err := db.ExecContext(ctx, "INSERT INTO im_files (file_id, uploader_id, name, content_type, size, object_key, status, audit_status, version, created_at)"+
				" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", id, 2, "f.txt", "text/plain", 5, "k/"+id, "pending", "pending", 1, now); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("apply", func(b *testing.B) {
		for b.Loop() {
			id := uuid.Must(uuid.NewV7())
			env, err := domain.NewEnvelope(tenant, domain.FileStreamID(id), 1, domain.EventFileCreated, domain.Actor{Type: domain.ActorUser, ID: "2"},
				domain.FileCreated{FileID: id.String(), Uploader: 2, Name: "f.txt", ContentType: "text/plain", Size: 5, ObjectKey: "k/" + id.String(), CreatedAt: now})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := store.Apply(ctx, tenant, []domain.Envelope{env}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
