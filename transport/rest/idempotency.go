package rest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// Idempotency headers.
const (
	HeaderIdempotencyKey      = "Idempotency-Key"
	HeaderIdempotentReplayed  = "Idempotent-Replayed"
	maxIdempotencyKeyLen      = 255
	idempotencyReleaseTimeout = 5 * time.Second
)

// idempotent is huma middleware for authenticated writes (POST, PUT, PATCH, DELETE). It needs
// an Idempotency-Key (400 idempotency_key_required without one) and:
//
//   - claims the key for the request's hash (method, path, query and canonical JSON body);
//   - with the key already finished for the same request, replays the stored answer verbatim:
//     the same status and body (including the first answer's request_id and server_time), with
//     header Idempotent-Replayed: true; X-Request-ID names the replaying request;
//   - with the key used by another request, answers 409 idempotency_key_reused;
//   - while the first request still runs, answers 409 request_in_progress (retryable).
//
// The body is read whole before the claim, since its hash is part of the key's record (the
// record keeps the hash, never the body). Bodies are capped at the operation's MaxBodyBytes
// (Config.MaxBodyBytes, or Config.MaxFileBytes for an upload; 413 too_large above it). Bodies
// over Config.MaxBodyBytes (uploads) are held in memory only within Config.UploadMemory for the
// whole node, counted at their Content-Length (at the cap without one) from before they are read
// until their request ends; an upload that does not fit is refused at once with 503 retry and
// Retry-After, before a byte of it is read, so a node never holds more than that many upload
// bytes however many clients upload together.
//
// A claimed request runs with its answer buffered. Answers that a retry must not get again
// (5xx, 408, 409, 425, 429, and 413 and 415, see storable) release the key; every other answer is stored for
// Config.IdempotencyTTL and then sent exactly as stored, so the first answer and its replays are
// byte-equal. When storing fails the answer is still sent, and the key frees itself after
// Config.IdempotencyPendingTimeout.
func (a *API) idempotent(ctx huma.Context, next func(huma.Context)) {
	if isPublic(ctx.Operation()) || !isWrite(ctx.Method()) || a.h.Idempotency == nil {
		next(ctx)
		return
	}
	c := ctx.Context()
	k, ok := a.idempotencyKey(ctx)
	if !ok {
		return
	}
	// checkInput has read a JSON body already (within MaxBodyBytes); any other body, a file
	// upload's, is read here.
	var body []byte
	large := false
	if bc, ok := ctx.(*bodyContext); ok {
		body = bc.body
	} else {
		// The operation's own limit (a file upload's is files.max_bytes), else the API's.
		limit := a.cfg.MaxBodyBytes
		if op := ctx.Operation(); op != nil && op.MaxBodyBytes > limit {
			limit = op.MaxBodyBytes
		}
		size, known := limit, false // what the body may take: its Content-Length when it sends one
		if cl, err := strconv.ParseInt(ctx.Header("Content-Length"), 10, 64); err == nil && cl >= 0 {
			if cl > limit {
				writeError(ctx, newError(RequestID(c), http.StatusRequestEntityTooLarge, ReasonTooLarge, "request body too large", nil))
				return
			}
			size, known = cl, true
		}
		large = limit > a.cfg.MaxBodyBytes
		if large && size > a.cfg.MaxBodyBytes {
			if !a.bodies.take(size) {
				e := newError(RequestID(c), http.StatusServiceUnavailable, ReasonRetry,
					"too many large uploads in progress on this node, retry", map[string]any{"retryable": true})
				e.headers.Set("Retry-After", "1")
				writeError(ctx, e)
				return
			}
			defer a.bodies.give(size)
		}
		var buf bytes.Buffer
		if known {
			buf.Grow(int(size) + bytes.MinRead) // read it without growing (and copying) as it comes
		}
		if _, err := buf.ReadFrom(io.LimitReader(ctx.BodyReader(), size+1)); err != nil {
			writeError(ctx, newError(RequestID(c), http.StatusBadRequest, ReasonInvalid, "could not read the body",
				map[string]any{"field": "body", "reason": "unreadable"}))
			return
		}
		body = buf.Bytes()
		if int64(len(body)) > size {
			writeError(ctx, newError(RequestID(c), http.StatusRequestEntityTooLarge, ReasonTooLarge, "request body too large", nil))
			return
		}
	}
	u := ctx.URL()
	hash := requestHash(ctx.Method(), u.Path, u.RawQuery, body, !large)
	claim, err := a.h.Idempotency.Claim(c, k, hash, a.cfg.IdempotencyTTL, a.cfg.IdempotencyPendingTimeout)
	if err != nil {
		writeError(ctx, MapError(c, a.fail(c, err)))
		return
	}
	switch claim.State {
	case Replay:
		ctx.SetHeader(HeaderIdempotentReplayed, "true")
		ctx.SetHeader("Content-Type", "application/json")
		ctx.SetStatus(claim.Status)
		_, _ = ctx.BodyWriter().Write(compactJSON(claim.Body))
		return
	case Reused:
		writeError(ctx, newError(RequestID(c), http.StatusConflict, ReasonIdempotencyKeyReused,
			"this Idempotency-Key was used with another request", map[string]any{"header": HeaderIdempotencyKey}))
		return
	case Running:
		writeError(ctx, newError(RequestID(c), http.StatusConflict, ReasonInProgress,
			"a request with this Idempotency-Key is still running, retry", map[string]any{"retryable": true}))
		return
	}
	a.runClaimed(ctx, next, k, hash, body)
}

// idempotencyKey reads and checks the Idempotency-Key header; on failure it has answered.
func (a *API) idempotencyKey(ctx huma.Context) (IdempotencyKey, bool) {
	c := ctx.Context()
	key := ctx.Header(HeaderIdempotencyKey)
	if key == "" {
		writeError(ctx, newError(RequestID(c), http.StatusBadRequest, ReasonIdempotencyKeyRequired,
			"writes need an Idempotency-Key header", map[string]any{"header": HeaderIdempotencyKey}))
		return IdempotencyKey{}, false
	}
	if !validIdempotencyKey(key) {
		writeError(ctx, newError(RequestID(c), http.StatusBadRequest, ReasonInvalid, "malformed Idempotency-Key",
			map[string]any{"field": HeaderIdempotencyKey, "reason": "bad_format",
				"detail": "1-255 printable ASCII characters (space included), not starting or ending with a space"}))
		return IdempotencyKey{}, false
	}
	p := principal(c)
	return IdempotencyKey{Tenant: p.Tenant, User: p.User, Key: key}, true
}

// runClaimed runs the request with its answer buffered, stores or releases the key, and sends
// the answer.
func (a *API) runClaimed(ctx huma.Context, next func(huma.Context), k IdempotencyKey, hash, body []byte) {
	c := ctx.Context()
	rec := &recorder{humaContext: ctx, body: body}
	finished := false
	defer func() {
		if !finished { // the handler panicked: let a retry run again
			a.release(c, k, hash)
		}
	}()
	next(rec)
	finished = true
	status, out := rec.status, rec.buf.Bytes()
	if status == 0 {
		status = http.StatusOK
	}
	if storable(status) && json.Valid(out) {
		stored, err := a.h.Idempotency.Complete(c, k, hash, status, out)
		if err == nil {
			out = stored
		} else {
			a.cfg.Logger.WarnContext(c, "could not store an idempotent answer", "request_id", RequestID(c), "err", err)
		}
	} else {
		a.release(c, k, hash)
	}
	ctx.SetStatus(status)
	_, _ = ctx.BodyWriter().Write(out)
}

func (a *API) release(ctx context.Context, k IdempotencyKey, hash []byte) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), idempotencyReleaseTimeout)
	defer cancel()
	if err := a.h.Idempotency.Release(ctx, k, hash); err != nil {
		a.cfg.Logger.WarnContext(ctx, "could not release an Idempotency-Key; it frees itself after the pending timeout",
			"request_id", RequestID(ctx), "err", err)
	}
}

// storable reports whether an answer with status is kept for replays. Answers that ask the
// client to try again are not, nor are 413 and 415: they judge how the request was sent (its
// size, its Content-Type), which the request's hash does not hold, so the same key and body sent
// right must run. The middleware before the claim gives those answers; this keeps one given by
// a handler from being stored either.
func storable(status int) bool {
	switch {
	case status >= 500, status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooEarly, status == http.StatusTooManyRequests,
		status == http.StatusRequestEntityTooLarge, status == http.StatusUnsupportedMediaType:
		return false
	}
	return true
}

// humaContext lets recorder embed a huma.Context without its field name hiding the Context method.
type humaContext huma.Context

// recorder is the huma.Context a claimed request runs with: it serves the body read for the
// hash and buffers the answer. Headers go straight to the client.
type recorder struct {
	humaContext
	body   []byte
	status int
	buf    bytes.Buffer
}

func (r *recorder) BodyReader() io.Reader { return bytes.NewReader(r.body) }
func (r *recorder) SetStatus(code int)    { r.status = code }
func (r *recorder) Status() int           { return r.status }
func (r *recorder) BodyWriter() io.Writer { return &r.buf }

// requestHash is SHA-256 over the method, path, query and body. With canonical, a JSON body is
// hashed in a canonical form (keys sorted, insignificant whitespace dropped, numbers as
// written), so re-encoding the same request does not count as another request; without it
// (file uploads, whose bytes are the request) the body is hashed as it came. Only the hash is
// kept, never the body.
func requestHash(method, path, query string, body []byte, canonical bool) []byte {
	h := sha256.New()
	_, _ = io.WriteString(h, method+" "+path+"?"+query+"\n")
	if canonical {
		body = canonicalJSON(body)
	}
	_, _ = h.Write(body)
	return h.Sum(nil)
}

func canonicalJSON(body []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return body
	}
	out, err := json.Marshal(v)
	if err != nil {
		return body
	}
	return out
}

// compactJSON returns body as every answer is written: without insignificant whitespace and
// ending in a newline. A body that is not JSON is returned as it is.
func compactJSON(body []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, body); err != nil {
		return body
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// validIdempotencyKey reports whether key is 1-255 printable ASCII characters (0x20-0x7E, so
// inner spaces are fine) that neither start nor end with a space: HTTP drops a header value's
// outer spaces, so such a key could never arrive as the client wrote it.
func validIdempotencyKey(key string) bool {
	if key == "" || len(key) > maxIdempotencyKeyLen || key[0] == ' ' || key[len(key)-1] == ' ' {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// bodyBudget bounds the bytes of large request bodies (uploads) held in memory at once.
type bodyBudget struct {
	mu   sync.Mutex
	free int64
}

// take reserves n bytes and reports whether they were free; it never waits.
func (b *bodyBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.free {
		return false
	}
	b.free -= n
	return true
}

// held is the number of bytes taken now.
func (b *bodyBudget) held(limit int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return limit - b.free
}

// give returns n bytes taken before.
func (b *bodyBudget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
}
