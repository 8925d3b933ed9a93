package replay

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
)

// ErrTablesInUse is the error of a rebuild or a verification of a tenant's MySQL read model
// while another run, in this process or another, builds the same tables (the same projection,
// tenant and kind of run): the two would drop and fill each other's tables. Wait for the other
// run to end, or end it; a run that was killed holds nothing, since its lock went with its
// connection.
var ErrTablesInUse = errors.New("another run is building the same tables")

// tablesLockName is the MySQL named lock of the tables a run builds in the database the
// connection is on: a lock name is server-wide and at most 64 characters, so the database and
// the tables are hashed.
const tablesLockName = "CONCAT('imledger-tables-', MD5(CONCAT(DATABASE(), ':', ?)))"

// tablesLock is a MySQL named lock on the fresh tables of one rebuild or verification, held on a
// connection of its own for as long as the run builds, reads and drops them.
type tablesLock struct {
	conn *sql.Conn
	name string
}

// lockTables takes the lock of the tables named by projection and suffix (the fresh tables'
// suffix) in db, without waiting: when another session holds it the error wraps
// ErrTablesInUse. The lock must be taken before leftovers of an interrupted run are dropped, and
// released (release) after the run's own tables are dropped or swapped in.
func lockTables(ctx context.Context, db *sql.DB, projection, suffix string) (*tablesLock, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock the %s tables: %w", suffix, err)
	}
	name := projection + suffix
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK("+tablesLockName+", 0)", name).Scan(&got); err != nil {
		discard(conn)
		return nil, fmt.Errorf("lock the %s tables: %w", suffix, err)
	}
	if !got.Valid || got.Int64 != 1 {
		discard(conn)
		return nil, fmt.Errorf("%w (%s, tables with suffix %s)", ErrTablesInUse, projection, suffix)
	}
	return &tablesLock{conn: conn, name: name}, nil
}

// release gives the lock back and closes its connection rather than returning it to the pool,
// so a release that failed cannot leave the lock with an idle connection.
func (l *tablesLock) release(ctx context.Context) {
	_, _ = l.conn.ExecContext(ctx, "DO RELEASE_LOCK("+tablesLockName+")", l.name)
	discard(l.conn)
}

// discard closes conn's session instead of returning it to its pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}
