package admin

import (
	"errors"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
	"github.com/imledger/imledger/internal/pgerr"
)

// classify maps a command's error to its rejection reason and details; rejected is false for a
// transient failure, which is retried.
//
//	*rejection               → its reason and details
//	*admintrust.Refusal      → its trust reason (signature_required, ..., actor_mismatch)
//	*domain.ValidationError  → invalid_payload {field, reason[, detail]}
//	*domain.DeniedError      → its reason (tenant_not_found, group_dissolved, cannot_remove_owner, ...)
//	domain.ErrNotFound       → not_found
//	domain.ErrConcurrency    → conflict
//	domain.ErrInvalid        → invalid_payload
//	anything else            → transient, unless permanent(err): failed at once
func classify(err error) (reason string, details map[string]any, rejected bool) {
	var (
		rej     *rejection
		refusal *admintrust.Refusal
		ve      *domain.ValidationError
		denied  *domain.DeniedError
	)
	switch {
	case errors.As(err, &rej):
		return rej.reason, rej.details, true
	case errors.As(err, &refusal):
		r := trustRejection(refusal)
		return r.reason, r.details, true
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

// trustReasons maps the trust refusals to their reasons.
var trustReasons = []struct {
	err    error
	reason string
}{
	{admintrust.ErrSignatureRequired, ReasonSignatureRequired}, {admintrust.ErrSignatureInvalid, ReasonSignatureInvalid},
	{admintrust.ErrUnknownKey, ReasonUnknownKey}, {admintrust.ErrStale, ReasonStaleCommand},
	{admintrust.ErrKeyScope, ReasonKeyScope}, {admintrust.ErrActorMismatch, ReasonActorMismatch},
}

// trustRejection is the rejection of a record or command a trust check refused: its reason, and
// details naming the key id the record claimed (echoed) and, for a stale one, its signing time.
func trustRejection(r *admintrust.Refusal) *rejection {
	reason := ReasonSignatureInvalid
	for _, t := range trustReasons {
		if errors.Is(r.Err, t.err) {
			reason = t.reason
		}
	}
	details := map[string]any{}
	if r.KeyID != "" {
		details["key_id"] = echo(r.KeyID)
	}
	if !r.SignedAt.IsZero() {
		details["signed_at"] = r.SignedAt.Format(time.RFC3339Nano)
	}
	if len(details) == 0 {
		details = nil
	}
	return &rejection{reason: reason, detail: echo(r.Detail), details: details}
}

// permanent reports whether err, a failure classify did not take for a rejection, is one that
// trying again cannot fix: PostgreSQL refused the command's data (SQLSTATE class 22, data
// exception, such as a NUL character or bytes that are not UTF-8; class 23, an integrity
// constraint the command handlers do not turn into a domain error). Such a command is failed at
// once instead of retried.
func permanent(err error) bool {
	return pgerr.Class(err, "22", "23")
}
