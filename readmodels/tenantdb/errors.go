package tenantdb

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/go-sql-driver/mysql"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
)

// MySQL server error numbers that mean "try again": the statement did nothing lasting.
var transientCodes = map[uint16]bool{
	1040: true, // ER_CON_COUNT_ERROR: too many connections
	1053: true, // ER_SERVER_SHUTDOWN
	1205: true, // ER_LOCK_WAIT_TIMEOUT
	1213: true, // ER_LOCK_DEADLOCK
	1927: true, // ER_CONNECTION_KILLED (MariaDB)
	2006: true, // CR_SERVER_GONE_ERROR
	2013: true, // CR_SERVER_LOST
}

// errUnknownDatabase is ER_BAD_DB_ERROR.
const errUnknownDatabase = 1049

// errNoSuchTable is ER_NO_SUCH_TABLE, which a connection opened before its database was dropped
// answers.
const errNoSuchTable = 1146

// WrapErr names the operation op in err and classifies it: an unreachable server, a lost
// connection, a deadlock or lock wait timeout becomes a domain.RetryableError (errors.Is(err,
// domain.ErrRetryable)), so a projector retries instead of parking the event. Context
// cancellation and every other error are wrapped as they are; a database or table that does not
// exist (the tenant's database was never made, was dropped or is broken) also wraps
// readmodels.ErrNotProvisioned. WrapErr(op, nil) is nil.
func WrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if IsTransient(err) {
		return domain.Retryable(op, err)
	}
	if IsMySQLError(err, errUnknownDatabase) || IsMySQLError(err, errNoSuchTable) {
		return fmt.Errorf("%s: %w: %w", op, readmodels.ErrNotProvisioned, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// IsTransient reports whether err means the MySQL server could not be reached or asked for the
// statement to be retried.
func IsTransient(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return transientCodes[me.Number]
	}
	var ne net.Error
	return errors.As(err, &ne) ||
		errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET)
}

// ErrDupEntry is ER_DUP_ENTRY, the MySQL server error of a duplicate key.
const ErrDupEntry = 1062

// IsMySQLError reports whether err is the MySQL server error number code.
func IsMySQLError(err error, code uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == code
}

// MySQL and MariaDB server errors that mean a value of the statement was refused: the statement
// did nothing (InnoDB undoes just that statement; the transaction carries on) and no retry can
// change the answer, because the value itself does not fit the column.
var dataCodes = map[uint16]bool{
	1264: true, // ER_WARN_DATA_OUT_OF_RANGE: a number outside the column's range
	1292: true, // ER_TRUNCATED_WRONG_VALUE: e.g. a DATETIME outside 1000-9999
	1366: true, // ER_TRUNCATED_WRONG_VALUE_FOR_FIELD: incorrect string value (not UTF-8)
	1406: true, // ER_DATA_TOO_LONG
	3140: true, // ER_INVALID_JSON_TEXT (MySQL's JSON type)
	3141: true, // ER_INVALID_JSON_TEXT_IN_PARAM
	3144: true, // ER_INVALID_JSON_CHARSET
	3157: true, // ER_JSON_DOCUMENT_TOO_DEEP (MySQL: deeper than 100 levels)
	3819: true, // ER_CHECK_CONSTRAINT_VIOLATED (MySQL)
	4025: true, // ER_CONSTRAINT_FAILED (MariaDB: the CHECK (json_valid(…)) of a JSON column,
	//             which refuses e.g. JSON nested deeper than 32 levels or a lone surrogate escape)
}

// IsDataError reports whether err is a server error that refuses a value of the statement (see
// dataCodes): invalid JSON for a JSON column, data too long, an incorrect string value, a value
// out of range. It never matches a transient error, and it matches by error number only, never
// by message text.
func IsDataError(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && dataCodes[me.Number]
}
