package rest

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/domain"
)

// ReasonDoc is one error reason of the API: the status it is answered with and when.
type ReasonDoc struct {
	Status int
	Reason string
	When   string
}

// reasonDocs is the catalogue of error reasons. MapError, the middleware, the rate limits, the
// route fallback and huma's own request errors answer only these, besides 403 with a command's
// refusal reason. The OpenAPI document lists, per operation and status, the reasons of this
// catalogue that the operation can answer.
var reasonDocs = []ReasonDoc{
	{http.StatusBadRequest, ReasonInvalid, "input rejected; details {field, reason[, detail]}"},
	{http.StatusBadRequest, ReasonIdempotencyKeyRequired, "a write without an Idempotency-Key header; details {header}"},
	{http.StatusUnauthorized, ReasonUnauthenticated, "no credentials (or no API key where required); details {header, reason}"},
	{http.StatusUnauthorized, ReasonTokenExpired, "the token has expired; log in again"},
	{http.StatusUnauthorized, ReasonTokenInvalid, "the token is malformed, forged or of another tenant"},
	{http.StatusUnauthorized, ReasonTokenRevoked, "the token was issued before a revocation, ban, password reset or suspension; log in again"},
	{http.StatusUnauthorized, ReasonSessionRevoked, "the token's login session was signed out (a logout, or a sign-out from another session); log in again"},
	{http.StatusUnauthorized, ReasonAPIKeyInvalid, "unknown or revoked tenant API key; details {header}"},
	{http.StatusUnauthorized, ReasonInvalidCredentials, "login refused: unknown login or wrong password"},
	{http.StatusForbidden, ReasonForbidden, "refused without a more specific reason"},
	{http.StatusForbidden, ReasonSignatureInvalid, "the download URL's signature is bad or expired; ask for a new URL"},
	{http.StatusForbidden, domain.ReasonTenantNotFound, "the tenant is not in the registry"},
	{http.StatusForbidden, domain.ReasonTenantSuspended, "the tenant is suspended"},
	{http.StatusForbidden, domain.ReasonUserBanned, "the user is banned"},
	{http.StatusForbidden, domain.ReasonRegistrationClosed, "the tenant does not take registrations"},
	{http.StatusNotFound, ReasonNotFound, "the group, message, user or route does not exist"},
	{http.StatusMethodNotAllowed, ReasonMethodNotAllowed, "the route exists for other methods; header Allow lists them"},
	{http.StatusConflict, ReasonConflict, "concurrent modification (a stale edit version, a lost race); retryable"},
	{http.StatusConflict, ReasonInProgress, "a request with the same Idempotency-Key is still running; retryable"},
	{http.StatusConflict, ReasonIdempotencyKeyReused, "the Idempotency-Key was used with another request; details {header}"},
	{http.StatusRequestTimeout, ReasonRequestTimeout, "a file upload's body stopped arriving for files.upload_idle_timeout; retryable"},
	{http.StatusRequestEntityTooLarge, ReasonTooLarge, "the body is over the server's limit (http.max_body_bytes)"},
	{http.StatusUnsupportedMediaType, ReasonUnsupportedMediaType, "the body is not application/json"},
	{http.StatusTooManyRequests, ReasonRateLimited, "too many attempts; header Retry-After says when to try again"},
	{http.StatusInternalServerError, ReasonInternal, "an unexpected failure, logged with the request id"},
	{http.StatusServiceUnavailable, ReasonRetry, "a dependency is down and nothing was written; retryable, header Retry-After"},
}

// Reasons returns the catalogue of error reasons, each with its status. A 403 may also carry a
// refusal reason of a command or read (not_member, muted, ...), which the catalogue does not
// list one by one.
func Reasons() []ReasonDoc { return slices.Clone(reasonDocs) }

// reasonStatus returns the status of reason in the catalogue, or 0.
func reasonStatus(reason string) int {
	for _, r := range reasonDocs {
		if r.Reason == reason {
			return r.Status
		}
	}
	return 0
}

// OpenAPI extensions on error responses: the reasons the operation may answer with the status,
// and whether other refusal reasons may appear besides them (403).
const (
	ExtReasons     = "x-reasons"
	ExtOpenReasons = "x-reasons-open"
)

// operationReasons returns the error statuses op can answer and, per status, its reasons. It is
// derived from what the middleware and the handlers do:
//
//   - 400 invalid everywhere (path, query, header and body validation); idempotency_key_required
//     on authenticated writes;
//   - 401: the authentication reasons on authenticated operations; on register and login the API
//     key reasons (and what the operation adds, e.g. invalid_credentials);
//   - 403 with the gate's reasons when a Gate is configured, or where the operation refuses;
//   - 404 where the operation lists it; 429 where it lists it and everywhere with a Limiter;
//   - 409 on authenticated writes (idempotency) and where the operation lists it;
//   - 413 on every write (the body limit), 415 where there is a request body;
//   - 500 and 503 everywhere.
func (a *API) operationReasons(o *huma.Operation) map[int][]string {
	public, write := isPublic(o), isWrite(o.Method)
	extra, _ := o.Metadata[metaErrs].([]int)
	more, _ := o.Metadata[metaReasons].([]string)
	out := map[int][]string{}
	add := func(status int, reasons ...string) { out[status] = append(out[status], reasons...) }
	add(http.StatusBadRequest, ReasonInvalid)
	if public {
		add(http.StatusUnauthorized, ReasonUnauthenticated, ReasonAPIKeyInvalid)
	} else {
		add(http.StatusUnauthorized, ReasonUnauthenticated, ReasonTokenExpired, ReasonTokenInvalid, ReasonTokenRevoked, ReasonSessionRevoked,
			ReasonAPIKeyInvalid)
		if write && !hasSecretBody(o) {
			add(http.StatusBadRequest, ReasonIdempotencyKeyRequired)
			add(http.StatusConflict, ReasonConflict, ReasonInProgress, ReasonIdempotencyKeyReused)
		}
	}
	if a.h.Gate != nil || slices.Contains(extra, http.StatusForbidden) {
		add(http.StatusForbidden, ReasonForbidden, domain.ReasonTenantNotFound, domain.ReasonTenantSuspended, domain.ReasonUserBanned)
	}
	for _, s := range extra {
		switch s {
		case http.StatusNotFound:
			add(s, ReasonNotFound)
		case http.StatusConflict:
			add(s, ReasonConflict)
		case http.StatusTooManyRequests:
			add(s, ReasonRateLimited)
		case http.StatusRequestTimeout:
			add(s, ReasonRequestTimeout)
		}
	}
	if a.h.Limiter != nil {
		add(http.StatusTooManyRequests, ReasonRateLimited)
	}
	if write {
		add(http.StatusRequestEntityTooLarge, ReasonTooLarge)
	}
	if o.RequestBody != nil {
		add(http.StatusUnsupportedMediaType, ReasonUnsupportedMediaType)
	}
	add(http.StatusInternalServerError, ReasonInternal)
	add(http.StatusServiceUnavailable, ReasonRetry)
	for _, r := range more {
		if s := reasonStatus(r); s != 0 {
			add(s, r)
		}
	}
	for s, rs := range out {
		slices.Sort(rs)
		out[s] = slices.Compact(rs)
	}
	return out
}

// document writes the error responses of every registered operation from operationReasons,
// replacing what huma derived (huma documents 422 for validation, which this API answers 400),
// and adds the further success statuses of the operations that answer more than one.
func (a *API) document() {
	for _, item := range a.huma.OpenAPI().Paths {
		for _, o := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch} {
			if o != nil {
				a.documentOperation(o)
			}
		}
	}
}

func (a *API) documentOperation(o *huma.Operation) {
	var errContent map[string]*huma.MediaType
	for code, r := range o.Responses {
		if n, err := strconv.Atoi(code); code == "default" || (err == nil && n >= 400) {
			if errContent == nil && r != nil {
				errContent = r.Content
			}
			delete(o.Responses, code)
		}
	}
	for status, reasons := range a.operationReasons(o) {
		r := &huma.Response{Description: reasonsDescription(status, reasons), Content: errContent,
			Extensions: map[string]any{ExtReasons: reasons}}
		switch status {
		case http.StatusUnauthorized:
			r.Headers = header("WWW-Authenticate", `The challenge: Bearer realm="imledger"`)
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			r.Headers = header("Retry-After", "Seconds to wait before trying again")
		case http.StatusForbidden:
			r.Extensions[ExtOpenReasons] = true
			r.Description += "\n- any refusal reason of the command or read, e.g. `not_member`, `not_admin`, `muted`, `blocked`"
		}
		o.Responses[strconv.Itoa(status)] = r
	}
	also, _ := o.Metadata[metaAlsoOK].(map[int]string)
	if def := o.Responses[strconv.Itoa(o.DefaultStatus)]; def != nil {
		for status, when := range also {
			o.Responses[strconv.Itoa(status)] = &huma.Response{
				Description: http.StatusText(status) + ": " + when, Content: def.Content, Headers: def.Headers}
		}
	}
}

// header documents one response header.
func header(name, doc string) map[string]*huma.Param {
	return map[string]*huma.Param{name: {Description: doc, Schema: &huma.Schema{Type: "string"}}}
}

// reasonsDescription is the description of an error response: the status text and a list of
// the reasons with what each means.
func reasonsDescription(status int, reasons []string) string {
	var b strings.Builder
	b.WriteString(http.StatusText(status))
	b.WriteString(". The envelope's `reason` is one of:")
	sorted := slices.Clone(reasons)
	sort.Strings(sorted)
	for _, r := range sorted {
		when := ""
		for _, d := range reasonDocs {
			if d.Reason == r {
				when = d.When
			}
		}
		b.WriteString("\n- `" + r + "`: " + when)
	}
	return b.String()
}
