package message

import (
	"errors"

	"github.com/imledger/imledger/domain"
)

// ErrClosed means the handler was closed and takes no more commands. It is returned wrapped in a
// *domain.RetryableError: another node, or this one after a restart, can take the same request.
var ErrClosed = errors.New("commands: handler closed")

// retryable returns err unchanged when it already says whether a retry can help (bad input,
// retryable); any other failure of a dependency becomes a *domain.RetryableError for op.
func retryable(op string, err error) error {
	if errors.Is(err, domain.ErrRetryable) || errors.Is(err, domain.ErrInvalid) {
		return err
	}
	return domain.Retryable(op, err)
}

// invalidField returns a *domain.ValidationError for field with a stable reason.
func invalidField(field, reason, detail string) error {
	return &domain.ValidationError{Field: field, Reason: reason, Detail: detail}
}

// asField renames the field of a *domain.ValidationError, so an error from a domain constructor
// names the command's field ("from" rather than "user_id"). Other errors pass unchanged.
func asField(err error, field string) error {
	var ve *domain.ValidationError
	if errors.As(err, &ve) {
		return &domain.ValidationError{Field: field, Reason: ve.Reason, Detail: ve.Detail}
	}
	return err
}
