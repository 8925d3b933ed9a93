package rest

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// Envelope is the body of every API answer.
type Envelope[T any] struct {
	// Code repeats the HTTP status code.
	Code int `json:"code" doc:"HTTP status code of the answer"`
	// Data is the result of a successful call; absent on errors.
	Data T `json:"data,omitempty" doc:"Result of a successful call; absent on errors"`
	// Reason is a stable machine-readable reason: "ok" on success, e.g. "invalid" on errors.
	Reason string `json:"reason" doc:"Stable machine-readable reason: ok on success, otherwise an error reason"`
	// Message is a human-readable summary. It never carries internal error text.
	Message string `json:"message" doc:"Human-readable summary; never internal error text"`
	// Details carries structured error details (for invalid input: field and reason).
	Details map[string]any `json:"details,omitempty" doc:"Structured error details, e.g. {field, reason} for invalid input"`
	// RequestID is the request's id, also sent as the X-Request-ID header.
	RequestID string `json:"request_id" doc:"Request id, also in the X-Request-ID response header"`
	// ServerTime is when the answer was built, UTC RFC 3339 with nanoseconds.
	ServerTime string `json:"server_time" doc:"Answer time, UTC RFC 3339 with fractional seconds"`
}

// ok builds a success envelope.
func ok[T any](ctx context.Context, status int, data T) Envelope[T] {
	return Envelope[T]{
		Code: status, Data: data, Reason: "ok", Message: strings.ToLower(http.StatusText(status)),
		RequestID: RequestID(ctx), ServerTime: serverTime(),
	}
}

func serverTime() string { return time.Now().UTC().Format(time.RFC3339Nano) }

// Error is an error answer: the envelope without data. It is what handlers return and what huma
// writes for the request errors it detects itself (malformed JSON, a body too large).
type Error struct {
	Code       int            `json:"code" doc:"HTTP status code of the answer"`
	Reason     string         `json:"reason" doc:"Stable machine-readable error reason, e.g. invalid, unauthenticated, unavailable"`
	Message    string         `json:"message" doc:"Human-readable summary; never internal error text"`
	Details    map[string]any `json:"details,omitempty" doc:"Structured error details, e.g. {field, reason} for invalid input, {retryable: true}"`
	RequestID  string         `json:"request_id" doc:"Request id, also in the X-Request-ID response header"`
	ServerTime string         `json:"server_time" doc:"Answer time, UTC RFC 3339 with fractional seconds"`

	status  int
	headers http.Header
}

// Error returns the reason and message.
func (e *Error) Error() string { return e.Reason + ": " + e.Message }

// GetStatus returns the HTTP status; it implements huma.StatusError.
func (e *Error) GetStatus() int { return e.status }

// GetHeaders returns extra response headers such as Retry-After; it implements huma.HeadersError.
func (e *Error) GetHeaders() http.Header { return e.headers }

func newError(requestID string, status int, reason, message string, details map[string]any) *Error {
	e := &Error{status: status, headers: http.Header{}}
	e.Code, e.Reason, e.Message, e.Details = status, reason, message, details
	e.RequestID, e.ServerTime = requestID, serverTime()
	return e
}

func init() {
	// huma builds its own request errors (and the error schema of the OpenAPI document) through
	// these package variables. Routing them into the envelope keeps one error shape for clients.
	// The binary runs a single huma API, so the process-wide setting is this API's setting.
	// Body members are named exactly as documented: with huma's default, a member differing only
	// in case passed as the documented one while encoding/json, which also folds case, decoded
	// whichever came last, so a value the schema checked under one spelling could be replaced
	// by an unchecked one under another. Case-sensitive, such a member is an unknown property
	// (400 invalid, reason schema).
	huma.ValidateStrictCasing = true
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		return requestError("", status, msg, errs)
	}
	huma.NewErrorWithContext = func(hctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
		id := ""
		if hctx != nil {
			id = RequestID(hctx.Context())
		}
		return requestError(id, status, msg, errs)
	}
}

// requestError turns an error huma detected (or a handler error huma did not recognise) into
// an *Error. Unknown failures become 500 "internal" without their text.
func requestError(requestID string, status int, msg string, errs []error) *Error {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		// 400 from huma is a body that is not JSON; 422 is JSON that breaks the schema (a wrong
		// type, an unknown property). Both are invalid input to clients.
		reason, message := "schema", msg
		switch {
		case status == http.StatusBadRequest && msg == "request body is required":
			// huma's answer to an empty body where one is required: nothing was malformed.
			reason, message = "required", "a JSON body is required"
		case status == http.StatusBadRequest:
			reason, message = "bad_json", "malformed JSON body"
		}
		details := map[string]any{"field": "body", "reason": reason}
		for _, err := range errs {
			if d, ok := err.(huma.ErrorDetailer); ok && d.ErrorDetail() != nil {
				ed := d.ErrorDetail()
				details["field"], details["detail"] = fieldOf(ed.Location), ed.Message
				break
			}
		}
		return newError(requestID, http.StatusBadRequest, ReasonInvalid, message, details)
	case http.StatusRequestEntityTooLarge:
		return newError(requestID, status, ReasonTooLarge, "request body too large", nil)
	case http.StatusUnsupportedMediaType, http.StatusNotAcceptable:
		return newError(requestID, status, ReasonUnsupportedMediaType, "use application/json", nil)
	case http.StatusInternalServerError:
		if len(errs) == 1 && errs[0] != nil {
			return mapError(requestID, errs[0])
		}
		return mapError(requestID, nil)
	}
	if status >= 500 {
		return newError(requestID, status, ReasonInternal, "internal error", nil)
	}
	return newError(requestID, status, strings.ReplaceAll(strings.ToLower(http.StatusText(status)), " ", "_"), msg, nil)
}

// fieldOf turns huma's "body.client_msg_id" into "client_msg_id", and "query.limit" or
// "path.device_id" into the parameter's name, as every other error about it names it.
func fieldOf(location string) string {
	for _, in := range []string{"body.", "query.", "path.", "header."} {
		if f, ok := strings.CutPrefix(location, in); ok {
			return f
		}
	}
	if location == "" {
		return "body"
	}
	return location
}

// reply is the output of an operation: its status and the envelope.
type reply[T any] struct {
	Status int
	Body   Envelope[T]
}

// respond builds a success reply.
func respond[T any](ctx context.Context, status int, data T) *reply[T] {
	return &reply[T]{Status: status, Body: ok(ctx, status, data)}
}

// rfc3339 formats t in UTC with fractional seconds, or "" for the zero time.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
