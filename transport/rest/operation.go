package rest

import (
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

// Names of the security schemes in the OpenAPI document.
const (
	securityBearer = "bearer"
	securityAPIKey = "apiKey"
)

const metaPublic = "imledger_public"

// isPublic reports whether op is served without a principal (register, login).
func isPublic(op *huma.Operation) bool {
	if op == nil {
		return false
	}
	p, _ := op.Metadata[metaPublic].(bool)
	return p
}

// isWrite reports whether method changes state and therefore needs an Idempotency-Key.
func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// op describes an operation; build turns it into a huma.Operation with the security, the
// standard error responses and the body limit.
type op struct {
	id, method, path, summary, desc string
	tag                             string
	status                          int  // the success status; default 200
	public                          bool // no principal (register, login)
	errs                            []int
}

func (a *API) build(o op) huma.Operation {
	status := o.status
	if status == 0 {
		status = http.StatusOK
	}
	errs := append([]int{http.StatusBadRequest}, o.errs...)
	if !o.public {
		errs = append(errs, http.StatusUnauthorized)
		if isWrite(o.method) {
			errs = append(errs, http.StatusConflict)
		}
	}
	if a.h.Limiter != nil {
		errs = append(errs, http.StatusTooManyRequests)
	}
	errs = append(errs, http.StatusServiceUnavailable)
	h := huma.Operation{
		OperationID: o.id, Method: o.method, Path: o.path, Summary: o.summary, Description: o.desc,
		Tags: []string{o.tag}, DefaultStatus: status, MaxBodyBytes: a.cfg.MaxBodyBytes, Errors: dedupe(errs),
		Metadata: map[string]any{metaPublic: o.public},
	}
	if !o.public {
		req := map[string][]string{securityBearer: {}}
		if a.cfg.RequireAPIKey {
			req[securityAPIKey] = []string{}
		}
		h.Security = []map[string][]string{req}
	}
	return h
}

func dedupe(codes []int) []int {
	seen := map[int]bool{}
	out := codes[:0]
	for _, c := range codes {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// IdempotencyHeader is embedded in the input of every authenticated write, so the OpenAPI
// document lists the header; the idempotency middleware enforces it before the handler runs.
type IdempotencyHeader struct {
	IdempotencyKey string `header:"Idempotency-Key" required:"true" maxLength:"255" doc:"Client-chosen key of this write, 1-255 printable ASCII characters, unique per user for 24 h. A retry with the same key and body gets the first answer again (header Idempotent-Replayed: true); the same key with another body is 409 idempotency_key_reused."`
}
