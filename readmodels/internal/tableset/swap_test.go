package tableset_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"

	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/internal/tableset"
)

// tables lists the tables of the connection's database, sorted.
func tables(ctx context.Context, t *testing.T, db *sql.DB) string {
	t.Helper()
	rows, err := db.QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY table_name")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	return strings.Join(names, ",")
}

// CreateLike copies the definitions, Swap puts the rebuilt tables in place (clearing a leftover
// "_old" table first and leaving pairs of one name alone), and Drop removes tables, against
// MariaDB.
func TestCreateLikeSwapDrop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	name := testenv.UniqueName("imt_tableset")
	server := testenv.MySQLServer(t)
	admin, err := sql.Open("mysql", server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() }) // after the DROP below: cleanups run last first
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS `"+name+"`") })
	db, err := sql.Open("mysql", strings.Replace(server, "/?", "/"+name+"?", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, s := range []string{
		"CREATE TABLE a (id BIGINT PRIMARY KEY, v VARCHAR(10))",
		"CREATE TABLE b (id BIGINT PRIMARY KEY)",
		"CREATE TABLE a_old (x INT)", // left by an interrupted swap
		"INSERT INTO a VALUES (1, 'live')",
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	live, rebuilt := []string{"a", "b"}, []string{"a_new", "b"}
	if err := tableset.CreateLike(ctx, db, "test", live, rebuilt); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO a_new VALUES (2, 'rebuilt')"); err != nil {
		t.Fatalf("the copied definition does not take a row: %v", err)
	}
	if err := tableset.Swap(ctx, db, "test", live, rebuilt); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := db.QueryRowContext(ctx, "SELECT v FROM a").Scan(&v); err != nil || v != "rebuilt" {
		t.Fatalf("after the swap a holds %q (%v), want the rebuilt row", v, err)
	}
	if got := tables(ctx, t, db); got != "a,b" {
		t.Fatalf("after the swap the tables are %s, want a,b", got)
	}
	if err := tableset.Swap(ctx, db, "test", []string{"a"}, []string{"bad name"}); err == nil || !strings.Contains(err.Error(), "test: bad table name") {
		t.Fatalf("a bad name was not refused: %v", err)
	}
	if err := tableset.Drop(ctx, db, "test", []string{"a", "missing"}); err != nil {
		t.Fatal(err)
	}
	if got := tables(ctx, t, db); got != "b" {
		t.Fatalf("after the drop the tables are %s, want b", got)
	}
}
