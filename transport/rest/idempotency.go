package rest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/imledger/imledger/domain"
)

// Idempotency headers.
const (
	HeaderIdempotencyKey     = "Idempotency-Key"
	HeaderIdempotentReplayed = "Idempotent-Replayed"
	maxIdempotencyKeyLen     = 255
	// idempotencyFinishTimeout bounds storing or releasing a key once its request has run; both
	// go on when the client has gone away, since a client that left is the one that retries.
	idempotencyFinishTimeout = 5 * time.Second
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
// bytes however many clients upload together. One user holds at most one largest upload's worth
// of it and one tenant at most half (429 rate_limited beyond), and a body that stops arriving for
// Config.UploadIdleTimeout ends with 408 request_timeout, so slow or stalled uploads of one user
// or tenant never keep another tenant's uploads out.
//
// A claimed request runs with its answer buffered. Answers that a retry must not get again
// (5xx, 408, 409, 425, 429, and 413 and 415, see storable) release the key; every other answer is stored for
// Config.IdempotencyTTL and then sent exactly as stored, so the first answer and its replays are
// byte-equal. The answer is stored even when the client has gone away meanwhile, since its retry
// must get it rather than run the request again. When storing fails the answer is still sent,
// and the key frees itself after Config.IdempotencyPendingTimeout.
func (a *API) idempotent(ctx huma.Context, next func(huma.Context)) {
	if isPublic(ctx.Operation()) || !isWrite(ctx.Method()) || hasSecretBody(ctx.Operation()) || a.h.Idempotency == nil {
		next(ctx)
		return
	}
	k, ok := a.idempotencyKey(ctx)
	if !ok {
		return
	}
	// checkInput has read a JSON body already (within MaxBodyBytes); any other body, a file
	// upload's, is read here.
	if bc, ok := ctx.(*bodyContext); ok {
		a.claim(ctx, next, k, bc.body, false)
		return
	}
	// The operation's own limit (a file upload's is files.max_bytes), else the API's.
	limit := a.cfg.MaxBodyBytes
	if op := ctx.Operation(); op != nil && op.MaxBodyBytes > limit {
		limit = op.MaxBodyBytes
	}
	size, known, ok := declaredSize(ctx, limit)
	if !ok {
		return
	}
	large := limit > a.cfg.MaxBodyBytes
	var src io.Reader = ctx.BodyReader()
	if large && size > a.cfg.MaxBodyBytes {
		if e := a.bodies.take(k.Tenant, k.User, size); e != nil {
			e.RequestID = RequestID(ctx.Context())
			writeError(ctx, e)
			return
		}
		defer a.bodies.give(k.Tenant, k.User, size)
		src = a.pacedBody(ctx, src)
	}
	body, ok := readUpload(ctx, src, size, known)
	if !ok {
		return
	}
	a.claim(ctx, next, k, body, large)
}

// declaredSize is what the body of a request whose limit is limit may take: its Content-Length
// when it sends one (known), else the limit. It is false when the Content-Length is over the
// limit, with the answer written.
func declaredSize(ctx huma.Context, limit int64) (size int64, known, ok bool) {
	size = limit
	if cl, err := strconv.ParseInt(ctx.Header("Content-Length"), 10, 64); err == nil && cl >= 0 {
		if cl > limit {
			writeError(ctx, newError(RequestID(ctx.Context()), http.StatusRequestEntityTooLarge, ReasonTooLarge, "request body too large", nil))
			return 0, false, false
		}
		size, known = cl, true
	}
	return size, known, true
}

// readUpload reads a body of at most size bytes from src, exactly size when known. It is false
// when the body is unreadable, stopped arriving or is too large, with the answer written.
func readUpload(ctx huma.Context, src io.Reader, size int64, known bool) ([]byte, bool) {
	c := ctx.Context()
	var buf bytes.Buffer
	if known {
		buf.Grow(int(size) + bytes.MinRead) // read it without growing (and copying) as it comes
	}
	if _, err := buf.ReadFrom(io.LimitReader(src, size+1)); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			writeError(ctx, newError(RequestID(c), http.StatusRequestTimeout, ReasonRequestTimeout,
				"the upload stopped arriving", map[string]any{"retryable": true}))
			return nil, false
		}
		writeError(ctx, newError(RequestID(c), http.StatusBadRequest, ReasonInvalid, "could not read the body",
			map[string]any{"field": "body", "reason": "unreadable"}))
		return nil, false
	}
	body := buf.Bytes()
	if int64(len(body)) > size {
		writeError(ctx, newError(RequestID(c), http.StatusRequestEntityTooLarge, ReasonTooLarge, "request body too large", nil))
		return nil, false
	}
	return body, true
}

// claim claims the key k for the request with this body and runs it, or answers what the key
// holds: the stored answer of the same request, or a conflict. A large body (a file upload's) is
// hashed as it came, any other in canonical form.
func (a *API) claim(ctx huma.Context, next func(huma.Context), k IdempotencyKey, body []byte, large bool) {
	c := ctx.Context()
	u := ctx.URL()
	hash := requestHash(ctx.Method(), u.EscapedPath(), u.RawQuery, body, !large)
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
		// Stored even when the client has gone away: its retry must get this answer, not run
		// the request again once the claim is taken for abandoned.
		sc, cancel := context.WithTimeout(context.WithoutCancel(c), idempotencyFinishTimeout)
		stored, err := a.h.Idempotency.Complete(sc, k, hash, status, out)
		cancel()
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
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), idempotencyFinishTimeout)
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

// requestHash is SHA-256 over the method, path, query and body. The path is taken as sent,
// escaped: decoded, a path element holding an escaped "?" or "/" (device a%3Fb, member 5%2Fmute)
// would read like another path with a query or more elements. With canonical, a JSON body is
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

// bodyBudget is the node's memory for upload bodies (Config.UploadMemory), shared fairly: one
// user holds at most one largest upload's worth (Config.MaxFileBytes) and one tenant at most
// half of it (or one largest upload, when that is more), so no user, and no tenant, can take
// the memory every other tenant's uploads need, however slowly its bodies arrive.
type bodyBudget struct {
	mu        sync.Mutex
	free      int64
	limit     int64
	perUser   int64
	perTenant int64
	users     map[Principal]int64
	tenants   map[domain.TenantID]int64
}

func newBodyBudget(limit, maxFile int64) *bodyBudget {
	return &bodyBudget{free: limit, limit: limit, perUser: maxFile, perTenant: max(limit/2, maxFile),
		users: map[Principal]int64{}, tenants: map[domain.TenantID]int64{}}
}

// take reserves n bytes for an upload of user in tenant; it never waits. It refuses with 429
// rate_limited (limit upload_memory_user or upload_memory_tenant) when the user or the tenant
// holds its share, and with 503 retry when the node's memory is taken.
func (b *bodyBudget) take(tenant domain.TenantID, user domain.UserID, n int64) *Error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := Principal{Tenant: tenant, User: user}
	var limit string
	switch {
	case b.users[u]+n > b.perUser:
		limit = "upload_memory_user"
	case b.tenants[tenant]+n > b.perTenant:
		limit = "upload_memory_tenant"
	case n > b.free:
		e := newError("", http.StatusServiceUnavailable, ReasonRetry,
			"too many large uploads in progress on this node, retry", map[string]any{"retryable": true})
		e.headers.Set("Retry-After", "1")
		return e
	default:
		b.free -= n
		b.users[u] += n
		b.tenants[tenant] += n
		return nil
	}
	e := newError("", http.StatusTooManyRequests, ReasonRateLimited, "too many uploads in progress, finish one first",
		map[string]any{"limit": limit, "retry_after_ms": 1000, "retryable": true})
	e.headers.Set("Retry-After", "1")
	return e
}

// held is the number of bytes taken now.
func (b *bodyBudget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limit - b.free
}

// give returns n bytes taken before for user in tenant.
func (b *bodyBudget) give(tenant domain.TenantID, user domain.UserID, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
	u := Principal{Tenant: tenant, User: user}
	if b.users[u] -= n; b.users[u] <= 0 {
		delete(b.users, u)
	}
	if b.tenants[tenant] -= n; b.tenants[tenant] <= 0 {
		delete(b.tenants, tenant)
	}
}

// pacedBody reads an upload body with a read deadline Config.UploadIdleTimeout past the start
// of each read, so a body that stops arriving ends its request, and gives its memory back,
// instead of holding it for as long as the client likes.
func (a *API) pacedBody(ctx huma.Context, r io.Reader) io.Reader {
	if a.cfg.UploadIdleTimeout <= 0 {
		return r
	}
	_, w := humago.Unwrap(ctx)
	return &pacedReader{r: r, rc: http.NewResponseController(w), idle: a.cfg.UploadIdleTimeout}
}

type pacedReader struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration
	off  bool // the connection takes no deadline (not HTTP/1): read without
}

func (p *pacedReader) Read(b []byte) (int, error) {
	if !p.off && p.rc.SetReadDeadline(time.Now().Add(p.idle)) != nil {
		p.off = true
	}
	return p.r.Read(b)
}
