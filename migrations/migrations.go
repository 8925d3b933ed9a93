package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// postgresFS holds the event store migrations, numbered 00001_name.sql with goose Up/Down sections.
//
//go:embed postgres/*.sql
var postgresFS embed.FS

// Postgres returns the embedded PostgreSQL migrations as a file system rooted at the migration
// files, for tools that want to list or print them.
func Postgres() fs.FS {
	sub, err := fs.Sub(postgresFS, "postgres")
	if err != nil {
		// fs.Sub only fails on an invalid path, and "postgres" is a constant valid path.
		panic(err)
	}
	return sub
}

// UpPostgres applies every pending event store migration to db (for example a *sql.DB opened
// with github.com/jackc/pgx/v5/stdlib). It holds a PostgreSQL session advisory lock while it runs,
// so several processes starting at once migrate one after the other; applying an up-to-date
// database is a no-op. Each migration runs in its own transaction: on failure the failing
// migration is rolled back, earlier ones stay applied, and the error names the migration.
func UpPostgres(ctx context.Context, db *sql.DB) error {
	p, err := newProvider(goose.DialectPostgres, db, Postgres())
	if err != nil {
		return fmt.Errorf("migrate postgres: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate postgres: %w", err)
	}
	return nil
}

// LatestPostgres returns the version of the newest embedded event store migration: the version
// goose records in goose_db_version once every migration is applied.
func LatestPostgres() (int64, error) {
	entries, err := fs.ReadDir(Postgres(), ".")
	if err != nil {
		return 0, fmt.Errorf("list postgres migrations: %w", err)
	}
	var latest int64
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil {
			return 0, fmt.Errorf("postgres migration %s: the name must start with its number", e.Name())
		}
		latest = max(latest, v)
	}
	return latest, nil
}

// newProvider builds a goose provider for one dialect that ignores goose's global registry of Go
// migrations and serialises concurrent runs with a session lock where the dialect has one.
func newProvider(dialect goose.Dialect, db *sql.DB, fsys fs.FS) (*goose.Provider, error) {
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	if dialect == goose.DialectPostgres {
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	return goose.NewProvider(dialect, db, fsys, opts...)
}
