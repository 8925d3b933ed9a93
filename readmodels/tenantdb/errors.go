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

// WrapErr names the operation op in err and classifies it: an unreachable server, a lost
// connection, a deadlock or lock wait timeout becomes a domain.RetryableError (errors.Is(err,
// domain.ErrRetryable)), so a projector retries instead of parking the event. Context
// cancellation and every other error are wrapped as they are. WrapErr(op, nil) is nil.
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
