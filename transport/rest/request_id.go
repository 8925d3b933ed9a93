package rest

import (
	"context"
	"regexp"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
)

// HeaderRequestID carries the request id in both directions.
const HeaderRequestID = "X-Request-ID"

type requestIDKey struct{}

var requestIDRe = regexp.MustCompile(`^[A-Za-z0-9._:\-]{1,128}$`)

// RequestID returns the request id stored in ctx, or "" outside a request.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// withRequestID is huma middleware: it takes the client's X-Request-ID when it is 1-128 of
// [A-Za-z0-9._:-], generates a UUIDv7 otherwise, echoes it in the response header and stores it
// in the context for the envelope and the logs.
func withRequestID(ctx huma.Context, next func(huma.Context)) {
	id := ctx.Header(HeaderRequestID)
	if !requestIDRe.MatchString(id) {
		id = newRequestID()
	}
	ctx.SetHeader(HeaderRequestID, id)
	next(huma.WithValue(ctx, requestIDKey{}, id))
}

func newRequestID() string {
	if u, err := uuid.NewV7(); err == nil {
		return u.String()
	}
	return uuid.NewString()
}
