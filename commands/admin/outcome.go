package admin

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/imledger/imledger/domain"
)

// classify maps a command's error to its rejection reason and details; rejected is false for a
// transient failure, which is retried.
//
//	*rejection               → its reason and details
//	*domain.ValidationError  → invalid_payload {field, reason[, detail]}
//	*domain.DeniedError      → its reason (tenant_not_found, group_dissolved, cannot_remove_owner, ...)
//	domain.ErrNotFound       → not_found
//	domain.ErrConcurrency    → conflict
//	domain.ErrInvalid        → invalid_payload
//	anything else            → transient, unless permanent(err): failed at once
func classify(err error) (reason string, details map[string]any, rejected bool) {
	var (
		rej    *rejection
		ve     *domain.ValidationError
		denied *domain.DeniedError
	)
	switch {
	case errors.As(err, &rej):
		return rej.reason, rej.details, true
	case errors.As(err, &ve):
		d := map[string]any{"field": echo(ve.Field), "reason": ve.Reason}
		if ve.Detail != "" {
			d["detail"] = echo(ve.Detail)
		}
		return ReasonInvalidPayload, d, true
	case errors.As(err, &denied):
		return denied.Reason, nil, true
	case errors.Is(err, domain.ErrNotFound):
		return ReasonNotFound, nil, true
	case errors.Is(err, domain.ErrConcurrency):
		return ReasonConflict, map[string]any{"retryable": true}, true
	case errors.Is(err, domain.ErrInvalid):
		return ReasonInvalidPayload, nil, true
	}
	return "", nil, false
}

// permanent reports whether err, a failure classify did not take for a rejection, is one that
// trying again cannot fix: PostgreSQL refused the command's data (SQLSTATE class 22, data
// exception, such as a NUL character or bytes that are not UTF-8; class 23, an integrity
// constraint the command handlers do not turn into a domain error). Such a command is failed at
// once instead of retried.
func permanent(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23"))
}
