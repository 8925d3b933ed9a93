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

// Operation metadata keys: whether the operation is public, the error statuses it adds to
// the standard ones, the reasons it adds to them, and the further success statuses it answers.
const (
	metaPublic  = "imledger_public"
	metaErrs    = "imledger_errors"
	metaReasons = "imledger_reasons"
	metaAlsoOK  = "imledger_also_ok"
	metaSecret  = "imledger_secret_body"
)

// ExtNoIdempotencyKey marks, in the OpenAPI document, an authenticated write that takes no
// Idempotency-Key: its body holds a password, whose fast hash the key's record would keep.
const ExtNoIdempotencyKey = "x-no-idempotency-key"

// hasSecretBody reports whether op's body holds a password: it takes no Idempotency-Key.
func hasSecretBody(op *huma.Operation) bool {
	if op == nil {
		return false
	}
	s, _ := op.Metadata[metaSecret].(bool)
	return s
}

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

// op describes an operation; build turns it into a huma.Operation with the security and the
// body limit. Its error responses are written by document once every operation is registered.
type op struct {
	id, method, path, summary, desc string
	tag                             string
	status                          int  // the success status; default 200
	public                          bool // no principal (register, login)
	errs                            []int
	// reasons are error reasons of the catalogue (Reasons) this operation answers besides the
	// standard ones of its statuses, e.g. login's invalid_credentials.
	reasons []string
	// alsoOK are success statuses besides status, each with what it means, e.g. a duplicate
	// send's 200.
	alsoOK map[int]string
	// secret marks an authenticated write whose body holds a password: it takes no
	// Idempotency-Key, whose record would keep the request's SHA-256, a fast hash of the password
	// that could be guessed from. Such an operation must be safe to repeat.
	secret bool
}

func (a *API) build(o op) huma.Operation {
	status := o.status
	if status == 0 {
		status = http.StatusOK
	}
	h := huma.Operation{
		OperationID: o.id, Method: o.method, Path: o.path, Summary: o.summary, Description: o.desc,
		Tags: []string{o.tag}, DefaultStatus: status, MaxBodyBytes: a.cfg.MaxBodyBytes,
		// One error status makes huma define the error schema; document writes the real list.
		Errors:   []int{http.StatusInternalServerError},
		Metadata: map[string]any{metaPublic: o.public, metaErrs: o.errs, metaReasons: o.reasons, metaAlsoOK: o.alsoOK, metaSecret: o.secret},
	}
	if o.secret {
		h.Extensions = map[string]any{ExtNoIdempotencyKey: true}
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

// IdempotencyHeader is embedded in the input of every authenticated write, so the OpenAPI
// document lists the header; the idempotency middleware enforces it before the handler runs.
type IdempotencyHeader struct {
	IdempotencyKey string `header:"Idempotency-Key" required:"true" maxLength:"255" doc:"Client-chosen key of this write, 1-255 printable ASCII characters, unique per user for 24 h. A retry with the same key and body gets the first answer again (header Idempotent-Replayed: true); the same key with another body is 409 idempotency_key_reused."`
}
