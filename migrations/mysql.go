package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

// mysqlFS holds the per-tenant read-model migrations, numbered 00001_name.sql with goose Up/Down
// sections.
//
//go:embed mysql/*.sql
var mysqlFS embed.FS

// mysqlLockTimeoutSeconds bounds how long UpMySQL waits for another process migrating the same
// database.
const mysqlLockTimeoutSeconds = 60

// MySQL returns the embedded MySQL read-model migrations as a file system rooted at the migration
// files, for tools that want to list or print them.
func MySQL() fs.FS {
	sub, err := fs.Sub(mysqlFS, "mysql")
	if err != nil {
		// fs.Sub only fails on an invalid path, and "mysql" is a constant valid path.
		panic(err)
	}
	return sub
}

// UpMySQL applies every pending read-model migration to the database db is connected to (one
// tenant database; the DSN must name it). It holds a MySQL named lock derived from the database
// name while it runs, so several processes provisioning the same tenant migrate one after the
// other; applying an up-to-date database is a no-op. MySQL commits DDL implicitly, so a failed
// migration may leave its earlier statements applied; the migrations use IF NOT EXISTS so a
// rerun completes them. The error names the failing migration. db must allow at least two open
// connections: one holds the lock while goose works on another.
func UpMySQL(ctx context.Context, db *sql.DB) (err error) {
	if n := db.Stats().MaxOpenConnections; n == 1 {
		return errors.New("migrate mysql: the pool must allow at least two connections")
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate mysql: %w", err)
	}
	defer conn.Close()
	var got sql.NullInt64
	const lockName = "CONCAT('imledger-migrate-', MD5(DATABASE()))"
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK("+lockName+", ?)", mysqlLockTimeoutSeconds).Scan(&got); err != nil {
		return fmt.Errorf("migrate mysql: take lock: %w", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("migrate mysql: another migration holds the lock for more than %ds", mysqlLockTimeoutSeconds)
	}
	defer func() {
		// A lock left behind is released when conn closes; the error only matters if nothing else failed.
		if _, rerr := conn.ExecContext(ctx, "DO RELEASE_LOCK("+lockName+")"); rerr != nil && err == nil {
			err = fmt.Errorf("migrate mysql: release lock: %w", rerr)
		}
	}()
	p, err := goose.NewProvider(goose.DialectMySQL, db, MySQL(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		return fmt.Errorf("migrate mysql: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate mysql: %w", err)
	}
	return nil
}
