package login

import (
	"context"
	"database/sql"

	"github.com/imledger/imledger/readmodels/internal/tableset"
)

// Tables names the tables of the read model. The projection and the queries use DefaultTables; a
// rebuild writes DefaultTables().WithSuffix("_rebuild") and then SwapTables.
type Tables struct {
	Sessions string // im_login_sessions
	Cutoffs  string // im_login_cutoffs
}

// DefaultTables returns the live table names created by the migrations.
func DefaultTables() Tables {
	return Tables{Sessions: "im_login_sessions", Cutoffs: "im_login_cutoffs"}
}

// WithSuffix returns t with s appended to every name, e.g. "_rebuild".
func (t Tables) WithSuffix(s string) Tables {
	return Tables{Sessions: t.Sessions + s, Cutoffs: t.Cutoffs + s}
}

const pkgName = "login"

func (t Tables) list() []string { return []string{t.Sessions, t.Cutoffs} }

// Validate checks that every name is 1 to 60 characters of [A-Za-z0-9_] and that they differ.
func (t Tables) Validate() error { return tableset.Validate(pkgName, t.list()) }

// CreateTablesLike creates each table of to like the matching table of from, without rows.
func CreateTablesLike(ctx context.Context, db *sql.DB, from, to Tables) error {
	return tableset.CreateLike(ctx, db, pkgName, from.list(), to.list())
}

// SwapTables puts the rebuilt tables in place of the live ones with one RENAME TABLE and drops the
// old ones (tableset.Swap).
func SwapTables(ctx context.Context, db *sql.DB, live, rebuilt Tables) error {
	return tableset.Swap(ctx, db, pkgName, live.list(), rebuilt.list())
}

// DropTables drops every table of t that exists.
func DropTables(ctx context.Context, db *sql.DB, t Tables) error {
	return tableset.Drop(ctx, db, pkgName, t.list())
}
