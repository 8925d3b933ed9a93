package msgstore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/imledger/imledger/readmodels/tenantdb"
)

// index is one secondary index as SHOW CREATE TABLE prints it.
type index struct {
	name string // without backticks
	def  string // "KEY `name` (`col`, …)", as ADD takes it
}

// plainIndexes returns table's non-unique secondary indexes (the "KEY `…`" lines of SHOW CREATE
// TABLE). The primary key, unique keys and full-text or spatial indexes are not among them.
func plainIndexes(ctx context.Context, db *sql.DB, table string) ([]index, error) {
	var name, ddl string
	if err := db.QueryRowContext(ctx, "SHOW CREATE TABLE "+q(table)).Scan(&name, &ddl); err != nil {
		return nil, tenantdb.WrapErr("show create table "+table, err)
	}
	var out []index
	for _, line := range strings.Split(ddl, "\n") {
		line = strings.TrimSuffix(strings.TrimSpace(line), ",")
		if !strings.HasPrefix(line, "KEY `") {
			continue
		}
		n, _, ok := strings.Cut(strings.TrimPrefix(line, "KEY `"), "`")
		if !ok {
			continue
		}
		out = append(out, index{name: n, def: line})
	}
	return out, nil
}

// dropIndexes drops indexes of table with one ALTER TABLE.
func dropIndexes(ctx context.Context, db *sql.DB, table string, indexes []index) error {
	if len(indexes) == 0 {
		return nil
	}
	parts := make([]string, len(indexes))
	for i, ix := range indexes {
		parts[i] = "DROP INDEX " + q(ix.name)
	}
	if _, err := db.ExecContext(ctx, "ALTER TABLE "+q(table)+" "+strings.Join(parts, ", ")); err != nil {
		return tenantdb.WrapErr("drop indexes of "+table, err)
	}
	return nil
}

// addIndexes adds indexes to table with one ALTER TABLE, so the rows are read once for all of
// them.
func addIndexes(ctx context.Context, db *sql.DB, table string, indexes []index) error {
	if len(indexes) == 0 {
		return nil
	}
	parts := make([]string, len(indexes))
	for i, ix := range indexes {
		parts[i] = "ADD " + ix.def
	}
	if _, err := db.ExecContext(ctx, "ALTER TABLE "+q(table)+" "+strings.Join(parts, ", ")); err != nil {
		return tenantdb.WrapErr("add indexes to "+table, err)
	}
	return nil
}
