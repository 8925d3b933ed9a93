package business

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Tables names the read-model tables Apply writes. The live projector and every query use
// DefaultTables; a rebuild writes DefaultTables().WithSuffix("_rebuild") and then SwapTables.
// Apply touches the Redis caches only when it writes the live tables, because the caches mirror
// those.
type Tables struct {
	Groups    string // im_groups
	Members   string // im_group_members
	Relations string // im_relations
	Users     string // im_users
	Processed string // im_processed_events, shared with other projectors by consumer group
}

// DefaultTables returns the live table names created by the migrations.
func DefaultTables() Tables {
	return Tables{
		Groups:    "im_groups",
		Members:   "im_group_members",
		Relations: "im_relations",
		Users:     "im_users",
		Processed: "im_processed_events",
	}
}

// WithSuffix returns t with s appended to every name, e.g. "_rebuild".
func (t Tables) WithSuffix(s string) Tables {
	return Tables{
		Groups:    t.Groups + s,
		Members:   t.Members + s,
		Relations: t.Relations + s,
		Users:     t.Users + s,
		Processed: t.Processed + s,
	}
}

// oldSuffix names the tables SwapTables moves aside before dropping them.
const oldSuffix = "_old"

// tableNameRe is what a table name may be; names are interpolated into SQL, so nothing else passes.
var tableNameRe = regexp.MustCompile(`^[A-Za-z0-9_]{1,60}$`)

func (t Tables) list() []string {
	return []string{t.Groups, t.Members, t.Relations, t.Users, t.Processed}
}

// Validate checks that every name is 1 to 60 characters of [A-Za-z0-9_] (room for the "_old"
// suffix within MySQL's 64) and that the names are distinct.
func (t Tables) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for _, n := range t.list() {
		if !tableNameRe.MatchString(n) {
			errs = append(errs, fmt.Errorf("business: bad table name %q", n))
		}
		if seen[strings.ToLower(n)] {
			errs = append(errs, fmt.Errorf("business: table name %q used twice", n))
		}
		seen[strings.ToLower(n)] = true
	}
	return errors.Join(errs...)
}

// q quotes a validated table name.
func q(name string) string { return "`" + name + "`" }

// CreateTablesLike creates each table of to with the definition of the matching table of from
// (CREATE TABLE IF NOT EXISTS … LIKE …), skipping pairs with the same name. Rows are not copied.
func CreateTablesLike(ctx context.Context, db *sql.DB, from, to Tables) error {
	if err := errors.Join(from.Validate(), to.Validate()); err != nil {
		return err
	}
	src, dst := from.list(), to.list()
	for i := range src {
		if src[i] == dst[i] {
			continue
		}
		if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+q(dst[i])+" LIKE "+q(src[i])); err != nil {
			return tenantdb.WrapErr("create table "+dst[i], err)
		}
	}
	return nil
}

// SwapTables puts the rebuilt tables in place of the live ones with one RENAME TABLE statement, so
// readers see either every old table or every new one, never a mix; then it drops the old tables.
// Pairs with the same name are left alone. The processed table is shared with other projectors:
// a caller that swaps it copies their rows into the rebuilt one first. Leftover "<live>_old"
// tables of an interrupted swap are dropped first. If the final drop fails the swap has still
// happened; the error says so. The Redis caches still hold what the old tables said: call
// Store.InvalidateTenant after the swap.
func SwapTables(ctx context.Context, db *sql.DB, live, rebuilt Tables) error {
	if err := errors.Join(live.Validate(), rebuilt.Validate()); err != nil {
		return err
	}
	l, r := live.list(), rebuilt.list()
	var renames, olds []string
	for i := range l {
		if l[i] == r[i] {
			continue
		}
		old := l[i] + oldSuffix
		olds = append(olds, old)
		renames = append(renames, q(l[i])+" TO "+q(old), q(r[i])+" TO "+q(l[i]))
	}
	if len(renames) == 0 {
		return nil
	}
	if err := dropAll(ctx, db, olds); err != nil {
		return fmt.Errorf("swap tables: clear leftovers: %w", err)
	}
	if _, err := db.ExecContext(ctx, "RENAME TABLE "+strings.Join(renames, ", ")); err != nil {
		return tenantdb.WrapErr("swap tables", err)
	}
	if err := dropAll(ctx, db, olds); err != nil {
		return fmt.Errorf("swap tables: swapped, but dropping the old tables failed: %w", err)
	}
	return nil
}

// DropTables drops every table of t that exists.
func DropTables(ctx context.Context, db *sql.DB, t Tables) error {
	if err := t.Validate(); err != nil {
		return err
	}
	return dropAll(ctx, db, t.list())
}

func dropAll(ctx context.Context, db *sql.DB, names []string) error {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = q(n)
	}
	if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+strings.Join(quoted, ", ")); err != nil {
		return tenantdb.WrapErr("drop tables", err)
	}
	return nil
}
