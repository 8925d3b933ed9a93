// Package tableset creates, swaps and drops a read model's tables given as a list of names, so
// that every read model rebuilds into suffixed copies and puts them in place the same way. The
// read-model packages keep their own Tables types and call this with the names in a fixed order;
// a pair is the names at the same index of two lists.
package tableset

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// oldSuffix names the tables Swap moves aside before dropping them.
const oldSuffix = "_old"

// nameRe is what a table name may be; names are interpolated into SQL, so nothing else passes.
var nameRe = regexp.MustCompile(`^[A-Za-z0-9_]{1,60}$`)

// Validate checks that every name is 1 to 60 characters of [A-Za-z0-9_] (room for the "_old"
// suffix within MySQL's 64) and that no two names are equal ignoring case, since table names
// may be case-insensitive on the server. pkg prefixes each error, e.g. "business".
func Validate(pkg string, names []string) error {
	var errs []error
	seen := map[string]bool{}
	for _, n := range names {
		if !nameRe.MatchString(n) {
			errs = append(errs, fmt.Errorf("%s: bad table name %q", pkg, n))
		}
		if seen[strings.ToLower(n)] {
			errs = append(errs, fmt.Errorf("%s: table name %q used twice", pkg, n))
		}
		seen[strings.ToLower(n)] = true
	}
	return errors.Join(errs...)
}

// Quote quotes a validated table name.
func Quote(name string) string { return "`" + name + "`" }

// Placeholders returns "?, ?, …" with n marks.
func Placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// RowPlaceholders returns n rows of width marks: "(?, ?), (?, ?)".
func RowPlaceholders(n, width int) string {
	row := "(" + Placeholders(width) + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// CreateLike creates each table of dst with the definition of the table of src at the same index
// (CREATE TABLE IF NOT EXISTS … LIKE …), skipping pairs with the same name. Rows are not copied.
// Both lists are validated first; pkg prefixes the validation errors.
func CreateLike(ctx context.Context, db *sql.DB, pkg string, src, dst []string) error {
	if err := errors.Join(Validate(pkg, src), Validate(pkg, dst)); err != nil {
		return err
	}
	for i := range src {
		if src[i] == dst[i] {
			continue
		}
		if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+Quote(dst[i])+" LIKE "+Quote(src[i])); err != nil {
			return tenantdb.WrapErr("create table "+dst[i], err)
		}
	}
	return nil
}

// Swap puts the rebuilt tables in place of the live ones at the same index with one RENAME TABLE
// statement, so readers see either every old table or every new one, never a mix; then it drops
// the old tables. Pairs with the same name are left alone. Leftover "<live>_old" tables of an
// interrupted swap are dropped first. If the final drop fails the swap has still happened; the
// error says so. Both lists are validated first; pkg prefixes the validation errors.
func Swap(ctx context.Context, db *sql.DB, pkg string, live, rebuilt []string) error {
	if err := errors.Join(Validate(pkg, live), Validate(pkg, rebuilt)); err != nil {
		return err
	}
	var renames, olds []string
	for i := range live {
		if live[i] == rebuilt[i] {
			continue
		}
		old := live[i] + oldSuffix
		olds = append(olds, old)
		renames = append(renames, Quote(live[i])+" TO "+Quote(old), Quote(rebuilt[i])+" TO "+Quote(live[i]))
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

// Drop drops every table of names that exists, after validating them; pkg prefixes the
// validation errors.
func Drop(ctx context.Context, db *sql.DB, pkg string, names []string) error {
	if err := Validate(pkg, names); err != nil {
		return err
	}
	return dropAll(ctx, db, names)
}

func dropAll(ctx context.Context, db *sql.DB, names []string) error {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = Quote(n)
	}
	if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS "+strings.Join(quoted, ", ")); err != nil {
		return tenantdb.WrapErr("drop tables", err)
	}
	return nil
}

// RowHash is the SQL expression of a 64-bit hash of one row, cols being the comma-separated SQL
// expressions of the columns it covers: the first 16 hex digits of the SHA-1 of the columns
// joined with '|'. A NULL column is skipped by CONCAT_WS, so wrap nullable ones in COALESCE.
func RowHash(cols string) string {
	return "CAST(CONV(LEFT(SHA1(CONCAT_WS('|', " + cols + ")), 16), 16, 10) AS UNSIGNED)"
}

// Summarize counts the rows of table in db and XORs the RowHash of cols over them, so that two
// copies of a table (a live one and a rebuild) compare in one statement each. The table name is
// validated first; pkg prefixes the validation error.
func Summarize(ctx context.Context, db *sql.DB, pkg, table, cols string) (readmodels.TableSummary, error) {
	var s readmodels.TableSummary
	if err := Validate(pkg, []string{table}); err != nil {
		return s, err
	}
	stmt := "SELECT COUNT(*), COALESCE(BIT_XOR(" + RowHash(cols) + "), 0) FROM " + Quote(table)
	if err := db.QueryRowContext(ctx, stmt).Scan(&s.Rows, &s.Checksum); err != nil {
		return s, tenantdb.WrapErr("checksum "+table, err)
	}
	return s, nil
}
