package msgstore

import (
	"context"
	"database/sql"

	"github.com/imledger/imledger/readmodels/internal/tableset"
)

// Tables names the read-model tables Apply writes and the readers read. The live projector uses
// DefaultTables; a rebuild writes DefaultTables().WithSuffix("_rebuild") and then SwapTables.
type Tables struct {
	GroupMessages  string // im_group_messages
	DirectMessages string // im_messages
	ReadMarks      string // im_read_marks
	Deletions      string // im_message_deletions
	Watermarks     string // im_topic_watermarks
}

// DefaultTables returns the live table names created by the migrations.
func DefaultTables() Tables {
	return Tables{
		GroupMessages:  "im_group_messages",
		DirectMessages: "im_messages",
		ReadMarks:      "im_read_marks",
		Deletions:      "im_message_deletions",
		Watermarks:     "im_topic_watermarks",
	}
}

// WithSuffix returns t with s appended to every name, e.g. "_rebuild".
func (t Tables) WithSuffix(s string) Tables {
	return Tables{
		GroupMessages:  t.GroupMessages + s,
		DirectMessages: t.DirectMessages + s,
		ReadMarks:      t.ReadMarks + s,
		Deletions:      t.Deletions + s,
		Watermarks:     t.Watermarks + s,
	}
}

// pkgName prefixes the validation errors of Validate and the table functions.
const pkgName = "msgstore"

// list returns the names in the order tableset pairs them.
func (t Tables) list() []string {
	return []string{t.GroupMessages, t.DirectMessages, t.ReadMarks, t.Deletions, t.Watermarks}
}

// Validate checks that every name is 1 to 60 characters of [A-Za-z0-9_] (room for the "_old"
// suffix within MySQL's 64) and that the names are distinct.
func (t Tables) Validate() error { return tableset.Validate(pkgName, t.list()) }

// q quotes a validated table name.
func q(name string) string { return tableset.Quote(name) }

// CreateTablesLike creates each table of to with the definition of the matching table of from
// (CREATE TABLE IF NOT EXISTS … LIKE …), skipping pairs with the same name. Rows are not copied.
func CreateTablesLike(ctx context.Context, db *sql.DB, from, to Tables) error {
	return tableset.CreateLike(ctx, db, pkgName, from.list(), to.list())
}

// SwapTables puts the rebuilt tables in place of the live ones with one RENAME TABLE statement, so
// readers see either every old table or every new one, never a mix; then it drops the old tables.
// Pairs with the same name are left alone. Leftover "<live>_old" tables from an interrupted swap are dropped first. If the final
// drop fails the swap has still happened; the error says so.
func SwapTables(ctx context.Context, db *sql.DB, live, rebuilt Tables) error {
	return tableset.Swap(ctx, db, pkgName, live.list(), rebuilt.list())
}

// DropTables drops every table of t that exists.
func DropTables(ctx context.Context, db *sql.DB, t Tables) error {
	return tableset.Drop(ctx, db, pkgName, t.list())
}
