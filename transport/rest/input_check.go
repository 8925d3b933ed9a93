package rest

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/domain"
)

// checkInput is huma middleware that refuses, before anything decodes or writes them, the
// inputs a decoder or a store would silently change or fail on. Every operation passes through
// it:
//
//   - a path or query parameter that is not valid UTF-8 or holds a control character (%ff,
//     %C0%80, %00) is 400 invalid {field: <parameter>, reason: bad_text};
//   - a JSON body that holds invalid UTF-8, a lone surrogate escape ("\ud800"), \u0000, or a
//     number that is not a finite double (1e400) is 400 invalid {field: <top-level member>,
//     reason: bad_text or bad_number} (domain.CheckBodyText). encoding/json would turn the
//     text into U+FFFD, so that two different passwords became one;
//   - the body of an operation that takes JSON is 415 unsupported_media_type unless its
//     Content-Type is application/json (no parameter, or charset=utf-8 in any case); a body
//     without a Content-Type is refused too, an empty one without is let through.
//
// It runs before the idempotency middleware, so none of these answers is stored for a key.
//
// The JSON body it reads is handed on in memory (bodyContext), so the idempotency middleware and
// huma read the same bytes. Bodies of other media types (a file upload) pass unread.
func (a *API) checkInput(ctx huma.Context, next func(huma.Context)) {
	op := ctx.Operation()
	if op == nil {
		next(ctx)
		return
	}
	c := ctx.Context()
	for _, p := range op.Parameters {
		var v string
		switch p.In {
		case "path":
			v = ctx.Param(p.Name)
		case "query":
			v = ctx.Query(p.Name)
		default:
			continue
		}
		if what := badParamText(v); what != "" {
			writeError(ctx, newError(RequestID(c), http.StatusBadRequest, ReasonInvalid, "invalid "+p.Name+": "+domain.ReasonBadText,
				map[string]any{"field": p.Name, "reason": domain.ReasonBadText, "detail": what}))
			return
		}
	}
	if !takesJSON(op) {
		next(ctx)
		return
	}
	ct := ctx.Header("Content-Type")
	if ct != "" && !jsonMediaType(ct) {
		writeError(ctx, unsupportedMediaType(RequestID(c)))
		return
	}
	limit := a.cfg.MaxBodyBytes
	if op.MaxBodyBytes > 0 {
		limit = op.MaxBodyBytes
	}
	body, e := readBody(ctx, limit)
	if e != nil {
		writeError(ctx, e)
		return
	}
	if ct == "" && len(body) > 0 {
		writeError(ctx, unsupportedMediaType(RequestID(c)))
		return
	}
	if err := domain.CheckBodyText(body); err != nil {
		writeError(ctx, MapError(c, err))
		return
	}
	next(&bodyContext{humaContext: ctx, body: body})
}

// badParamText says what is wrong with a parameter's text, or "" when nothing is.
func badParamText(v string) string {
	switch {
	case !utf8.ValidString(v):
		return "invalid UTF-8"
	case strings.ContainsFunc(v, unicode.IsControl):
		return "a control character"
	}
	return ""
}

// takesJSON reports whether the operation takes a JSON request body.
func takesJSON(op *huma.Operation) bool {
	if op.RequestBody == nil {
		return false
	}
	_, ok := op.RequestBody.Content["application/json"]
	return ok
}

// jsonMediaType reports whether a request's Content-Type names JSON as the API takes it:
// application/json, with no parameter or charset=utf-8 (any case). JSON is UTF-8 (RFC 8259), so
// another charset is refused rather than decoded as if it were UTF-8, and so are other media
// types, application/merge-patch+json and other +json types included: no route documents them.
func jsonMediaType(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return false
	}
	for k, v := range params {
		if k != "charset" || !strings.EqualFold(v, "utf-8") {
			return false
		}
	}
	return true
}

// unsupportedMediaType is the 415 answer of a JSON route whose body is not application/json.
func unsupportedMediaType(requestID string) *Error {
	return newError(requestID, http.StatusUnsupportedMediaType, ReasonUnsupportedMediaType, "use application/json", nil)
}

// readBody reads the request body, at most limit bytes; a larger one is 413 too_large. A body
// checkInput read before (bodyContext) is returned as it is, within the same limit.
func readBody(ctx huma.Context, limit int64) ([]byte, *Error) {
	if bc, ok := ctx.(*bodyContext); ok && int64(len(bc.body)) <= limit {
		return bc.body, nil
	}
	id := RequestID(ctx.Context())
	body, err := io.ReadAll(io.LimitReader(ctx.BodyReader(), limit+1))
	if err != nil {
		return nil, newError(id, http.StatusBadRequest, ReasonInvalid, "could not read the body",
			map[string]any{"field": "body", "reason": "unreadable"})
	}
	if int64(len(body)) > limit {
		return nil, newError(id, http.StatusRequestEntityTooLarge, ReasonTooLarge, "request body too large", nil)
	}
	return body, nil
}

// bodyContext is the huma.Context of a request whose body was read and checked: it serves the
// body from memory.
type bodyContext struct {
	humaContext
	body []byte
}

func (b *bodyContext) BodyReader() io.Reader { return bytes.NewReader(b.body) }

// Header serves the request's headers, with the Content-Type checkInput accepted written as
// application/json, so huma, whose format lookup is case-sensitive, decodes every accepted form
// (Application/JSON; charset=UTF-8, or none with an empty body) as JSON.
func (b *bodyContext) Header(name string) string {
	if http.CanonicalHeaderKey(name) == "Content-Type" {
		return "application/json"
	}
	return b.humaContext.Header(name)
}

// jsonFormat is huma's JSON format with decoding errors told in JSON's terms
// (domain.DescribeJSONError) instead of encoding/json's, which name Go types.
var jsonFormat = huma.Format{
	Marshal: huma.DefaultJSONFormat.Marshal,
	Unmarshal: func(data []byte, v any) error {
		if err := json.Unmarshal(data, v); err != nil {
			return &jsonError{text: domain.DescribeJSONError(err)}
		}
		return nil
	},
}

// jsonError is a decoding error whose text a client may read.
type jsonError struct{ text string }

func (e *jsonError) Error() string { return e.text }
