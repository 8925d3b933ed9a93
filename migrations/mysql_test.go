package migrations_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/migrations"
)

func TestUpMySQLConcurrentAndIdempotent(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	server := testenv.MySQLServer(t)
	name := testenv.UniqueName("imt_mig")
	testenv.DropMySQLDatabasesAtCleanup(t, name)
	admin, err := sql.Open("mysql", server)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", strings.Replace(server, "/?", "/"+name+"?", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() { errs <- migrations.UpMySQL(ctx, db) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := migrations.UpMySQL(ctx, db); err != nil {
		t.Fatalf("second run: %v", err)
	}
	for _, table := range []string{"im_group_messages", "im_messages", "im_read_marks", "im_message_deletions"} {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatalf("table %s: %v", table, err)
		}
	}
	// The projectors keep no record of applied events: every write is idempotent.
	var processed int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'im_processed_events'").Scan(&processed); err != nil || processed != 0 {
		t.Fatalf("im_processed_events exists (%d, %v)", processed, err)
	}
	var applied int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM goose_db_version WHERE version_id = 1 AND is_applied").Scan(&applied); err != nil {
		t.Fatal(err)
	}
	if applied != 1 {
		t.Fatalf("migration 1 recorded %d times, want 1", applied)
	}
}
