package migrations_test

import (
	"context"
	"database/sql"
	"io/fs"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver

	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/migrations"
)

func TestUpPostgresIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range 2 {
		if err := migrations.UpPostgres(ctx, db); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}
	for _, table := range []string{"events", "relay_checkpoints"} {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatalf("table %s: %v", table, err)
		}
	}
	files, err := fs.Glob(migrations.Postgres(), "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded migrations: %v %v", files, err)
	}
	var version, applied int64
	if err := db.QueryRowContext(ctx, "SELECT max(version_id), count(*) FILTER (WHERE version_id > 0) FROM goose_db_version").Scan(&version, &applied); err != nil {
		t.Fatal(err)
	}
	// Numbers are handed out ahead of time, so the files may skip one: the newest is applied,
	// and every file once.
	latest, err := migrations.LatestPostgres()
	if err != nil || version != latest || applied != int64(len(files)) {
		t.Fatalf("goose version = %d with %d rows, want %d (LatestPostgres, %v) and %d files applied once each",
			version, applied, latest, err, len(files))
	}
}
