package msgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/imledger/imledger/readmodels/tenantdb"
)

// loadDataMinRows is the shortest run of messages a bulk load writes with LOAD DATA; a shorter
// run costs less as one multi-row INSERT than a file transfer.
const loadDataMinRows = 64

// maxListedWarnings is the max_error_count a load sets: the most warnings SHOW WARNINGS lists
// (the server's maximum). A load with more warnings is written again with INSERT.
const maxListedWarnings = 65535

// datetimeLayout is how a DATETIME(3) value is spelled in a loaded row.
const datetimeLayout = "2006-01-02 15:04:05.000"

// errLoadNotClean means LOAD DATA left warnings other than skipped duplicates (a value MySQL
// truncated or converted). The load is rolled back and the batch written with INSERT, which
// fails on such a value exactly as Apply does.
var errLoadNotClean = errors.New("load data left warnings other than duplicate rows")

// readerSeq names each load's reader uniquely within the process.
var readerSeq atomic.Uint64

// loadMessages is the messageWriter of a bulk load: runs of at least loadDataMinRows rows are
// streamed with LOAD DATA LOCAL INFILE as tab-separated text, IGNORE keeping a row that exists
// as it is (as insertMessages does); shorter runs go to insertMessages. It fails with
// errLoadNotClean when the server reports warnings other than the skipped duplicates.
func loadMessages(ctx context.Context, tx *sql.Tx, table, columns string, ops []op, row func(op) []any) error {
	if len(ops) < loadDataMinRows {
		return insertMessages(ctx, tx, table, columns, ops, row)
	}
	name := "imledger-msgstore-" + strconv.FormatUint(readerSeq.Add(1), 10)
	mysql.RegisterReaderHandler(name, func() io.Reader { return &tsvReader{ops: ops, row: row} })
	defer mysql.DeregisterReaderHandler(name)
	stmt := "LOAD DATA LOCAL INFILE 'Reader::" + name + "' IGNORE INTO TABLE " + q(table) + " CHARACTER SET utf8mb4" +
		" FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n' (" + columns + ")"
	// Let SHOW WARNINGS list every warning of a large run, not the first 64 (the default), so
	// duplicates can be told from refused rows below.
	if _, err := tx.ExecContext(ctx, "SET SESSION max_error_count = "+strconv.Itoa(maxListedWarnings)); err != nil {
		return tenantdb.WrapErr("apply: load messages into "+table, err)
	}
	res, err := tx.ExecContext(ctx, stmt)
	if err != nil {
		return tenantdb.WrapErr("apply: load messages into "+table, err)
	}
	inserted, err := res.RowsAffected()
	if err != nil {
		return tenantdb.WrapErr("apply: load messages into "+table, err)
	}
	var warnings int64
	if err := tx.QueryRowContext(ctx, "SELECT @@warning_count").Scan(&warnings); err != nil {
		return tenantdb.WrapErr("apply: load messages into "+table, err)
	}
	if warnings == 0 {
		return nil
	}
	// IGNORE reports one warning per row it skipped as a duplicate; any other warning is a row it
	// skipped or a value it changed because the server refused it (a JSON column's constraint,
	// a string too long). Counting is not enough: a refused row is skipped with one warning too.
	if skipped := int64(len(ops)) - inserted; warnings != skipped {
		return fmt.Errorf("apply: load messages into %s: %d rows, %d inserted, %d warnings: %w",
			table, len(ops), inserted, warnings, errLoadNotClean)
	}
	dups, listed, err := duplicateWarnings(ctx, tx)
	if err != nil {
		return tenantdb.WrapErr("apply: load messages into "+table, err)
	}
	if dups != warnings || listed != warnings {
		return fmt.Errorf("apply: load messages into %s: %d warnings, %d of them duplicates: %w", table, warnings, dups, errLoadNotClean)
	}
	return nil
}

// duplicateWarnings lists the warnings of the last statement and returns how many are duplicate
// keys (ER_DUP_ENTRY) and how many were listed (at most max_error_count).
func duplicateWarnings(ctx context.Context, tx *sql.Tx) (dups, listed int64, err error) {
	rows, err := tx.QueryContext(ctx, "SHOW WARNINGS")
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var level, msg string
		var code uint16
		if err := rows.Scan(&level, &code, &msg); err != nil {
			return 0, 0, err
		}
		listed++
		if code == tenantdb.ErrDupEntry {
			dups++
		}
	}
	return dups, listed, rows.Err()
}

// tsvReader streams the rows of ops as LOAD DATA's default text format: fields separated by
// tabs, rows ended by newlines, NULL as \N, and backslash, tab, newline and NUL escaped with a
// backslash. Rows are encoded as the driver reads, so encoding overlaps the transfer.
type tsvReader struct {
	ops  []op
	row  func(op) []any
	next int    // index of the next op to encode
	buf  []byte // encoded bytes; buf[off:] are not read yet
	off  int
}

// Read implements io.Reader.
func (r *tsvReader) Read(p []byte) (int, error) {
	if r.off > 0 {
		r.buf = append(r.buf[:0], r.buf[r.off:]...)
		r.off = 0
	}
	for len(r.buf) < len(p) && r.next < len(r.ops) {
		var err error
		if r.buf, err = appendTSVRow(r.buf, r.row(r.ops[r.next])); err != nil {
			return 0, err
		}
		r.next++
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.buf)
	r.off = n
	return n, nil
}

// appendTSVRow appends one row of values to b.
func appendTSVRow(b []byte, values []any) ([]byte, error) {
	for i, v := range values {
		if i > 0 {
			b = append(b, '\t')
		}
		switch x := v.(type) {
		case nil:
			b = append(b, '\\', 'N')
		case string:
			b = appendTSVString(b, x)
		case int64:
			b = strconv.AppendInt(b, x, 10)
		case int:
			b = strconv.AppendInt(b, int64(x), 10)
		case bool:
			if x {
				b = append(b, '1')
			} else {
				b = append(b, '0')
			}
		case time.Time:
			b = x.UTC().AppendFormat(b, datetimeLayout)
		default:
			return b, fmt.Errorf("load data: column %d: unsupported value of type %T", i, v)
		}
	}
	return append(b, '\n'), nil
}

// appendTSVString appends s with LOAD DATA's escapes.
func appendTSVString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case 0:
			b = append(b, '\\', '0')
		default:
			b = append(b, c)
		}
	}
	return b
}
