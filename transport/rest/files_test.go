package rest_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/rest"
)

// createFile registers a file of size bytes and returns its id.
func (s *stack) createFile(t *testing.T, token, key, name, ctype string, size int) string {
	t.Helper()
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/files", token: token, key: key,
		body: fmt.Sprintf(`{"name":%q,"content_type":%q,"size":"%d"}`, name, ctype, size)})
	expect(t, "create file "+name, a, http.StatusCreated, "ok")
	return a.data(t)["file_id"].(string)
}

// putContent uploads body as a file's bytes with its Content-Length.
func (s *stack) putContent(t *testing.T, token, key, id string, body io.Reader, size int64) answer {
	t.Helper()
	hr, err := http.NewRequestWithContext(testCtx(t), http.MethodPut, s.srv.URL+"/v1/im/files/"+id+"/content", body)
	if err != nil {
		t.Fatal(err)
	}
	hr.ContentLength = size
	hr.Header.Set("Content-Type", "application/octet-stream")
	hr.Header.Set("Authorization", "Bearer "+token)
	hr.Header.Set(rest.HeaderIdempotencyKey, key)
	resp, err := s.srv.Client().Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	if err := json.Unmarshal(raw, &a.Body); err != nil {
		t.Fatalf("upload: answer is not the JSON envelope: %v: %s", err, raw)
	}
	return a
}

// TestUploadOverOneMiB: a file larger than http.max_body_bytes is uploaded through PUT …/content
// up to files.max_bytes and served byte for byte; its retry with the same key is replayed; other
// routes keep http.max_body_bytes.
func TestUploadOverOneMiB(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true, files: true})
	_, alice := s.user(t, "alice")
	const size = 2 << 20
	body := make([]byte, size)
	_, _ = rand.Read(body)
	id := s.createFile(t, alice, "k1", "big.bin", "application/octet-stream", size)
	a := s.putContent(t, alice, "k2", id, bytes.NewReader(body), size)
	expect(t, "upload 2 MiB", a, http.StatusOK, "ok")
	if d := a.data(t); d["status"] != domain.FileStatusUploaded || d["size"] != strconv.Itoa(size) {
		t.Fatalf("upload answer %s, want the file uploaded with its size", a.Raw)
	}
	a = s.putContent(t, alice, "k2", id, bytes.NewReader(body), size)
	if a.Status != http.StatusOK || a.Header.Get(rest.HeaderIdempotentReplayed) != "true" {
		t.Fatalf("the same upload again: %d %s, want the first answer replayed", a.Status, a.Raw)
	}
	_, r, err := s.files.Open(testCtx(t), s.tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("stored %d bytes (%v), want the %d uploaded", len(got), err, size)
	}
	big := `{"name":"` + strings.Repeat("a", 2<<20) + `","content_type":"text/plain","size":"1"}`
	expect(t, "a 2 MiB JSON body", s.do(t, req{method: http.MethodPost, path: "/v1/im/files", token: alice, key: "k3", body: big}),
		http.StatusRequestEntityTooLarge, rest.ReasonTooLarge)
	over := s.createFile(t, alice, "k4", "over.bin", "application/octet-stream", 1)
	expect(t, "an upload over files.max_bytes", s.putContent(t, alice, "k5", over, io.LimitReader(rand.Reader, 100<<20+1), 100<<20+1),
		http.StatusRequestEntityTooLarge, rest.ReasonTooLarge)
}

// TestUploadsBoundedByUploadMemory: while uploads hold UploadMemory, another upload is refused
// at once with 503 retry; once they end it runs.
func TestUploadsBoundedByUploadMemory(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	s := newStack(t, rest.Config{MaxFileBytes: 3 * mib, UploadMemory: 4 * mib}, stackOpts{reads: true, files: true})
	_, alice := s.user(t, "alice")
	carol := s.otherTenantUser(t, "carol") // within her user's and her tenant's share
	first := s.createFile(t, alice, "c1", "a.bin", "application/octet-stream", 3*mib)
	second := s.createFile(t, carol, "c2", "b.bin", "application/octet-stream", 2*mib)
	pr, pw := io.Pipe()
	done := make(chan answer, 1)
	go func() { done <- s.putContent(t, alice, "u1", first, pr, 3*mib) }()
	if _, err := pw.Write(make([]byte, mib)); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, s, 3*mib)
	a := s.putContent(t, carol, "u2", second, bytes.NewReader(make([]byte, 2*mib)), 2*mib)
	expect(t, "an upload beyond UploadMemory", a, http.StatusServiceUnavailable, rest.ReasonRetry)
	if a.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	if _, err := pw.Write(make([]byte, 2*mib)); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	expect(t, "the first upload", <-done, http.StatusOK, "ok")
	waitHeld(t, s, 0)
	expect(t, "the second upload, retried", s.putContent(t, carol, "u2", second, bytes.NewReader(make([]byte, 2*mib)), 2*mib),
		http.StatusOK, "ok")
}

// TestSendReferencesOnlyReadableFiles: a message may name in head.files only files its sender
// may read. Bob cannot gain access to Alice's file by naming it in his own group, nor reference
// her files that are not approved; Alice may reference her own file before its check; once
// Alice shared an approved file with Bob, he may reference it. A refused send writes nothing.
func TestSendReferencesOnlyReadableFiles(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true, files: true})
	aliceID, alice := s.user(t, "alice")
	bobID, bob := s.user(t, "bob")
	p2p := "p2p" + aliceID + "_" + bobID
	if len(bobID) < len(aliceID) || len(bobID) == len(aliceID) && bobID < aliceID {
		p2p = "p2p" + bobID + "_" + aliceID
	}
	upload := func(key, name string, check bool) string {
		t.Helper()
		id := s.createFile(t, alice, key+"c", name, "text/plain", 5)
		expect(t, "upload "+name, s.putContent(t, alice, key+"u", id, strings.NewReader("hello"), 5), http.StatusOK, "ok")
		if check {
			s.checkFiles(t)
		}
		return id
	}
	approved := upload("f2", "f2.txt", true)
	unchecked := upload("f3", "f3.txt", false)
	pending := s.createFile(t, alice, "f4", "f4.txt", "text/plain", 5)
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/groups", token: bob, key: "g1", body: `{"name":"Bob's"}`})
	expect(t, "bob creates a group", a, http.StatusCreated, "ok")
	bobs := "grp" + a.data(t)["group_id"].(string)
	s.project(t)
	send := func(token, topic, cmid, file string) answer {
		t.Helper()
		return s.do(t, req{method: http.MethodPost, path: "/v1/im/topics/" + topic + "/messages", token: token, key: "s-" + cmid,
			body: `{"client_msg_id":"` + cmid + `","content":"x","head":{"files":["` + file + `"]}}`})
	}
	fileURL := func(token, id string) answer {
		return s.do(t, req{method: http.MethodGet, path: "/v1/im/files/" + id + "/url", token: token})
	}

	expect(t, "bob's URL of alice's file", fileURL(bob, approved), http.StatusForbidden, "not_shared")
	for i, c := range []struct{ what, file string }{
		{"alice's approved file", approved}, {"alice's file not checked yet", unchecked}, {"alice's pending file", pending},
		{"an unknown file", "0190d7a4-5b1e-7c2d-8e3f-4a5b6c7d8e9f"},
	} {
		expect(t, "bob sends "+c.what, send(bob, bobs, "steal-"+strconv.Itoa(i), c.file), http.StatusForbidden, domain.ReasonFileNotReadable)
	}
	if n := s.count(t, "SELECT count(*) FROM events WHERE stream_id = $1", bobs); n != 0 {
		t.Fatalf("%d events in %s after refused sends, want none", n, bobs)
	}
	s.project(t)
	expect(t, "bob's URL after the refused sends", fileURL(bob, approved), http.StatusForbidden, "not_shared")

	expect(t, "alice sends her file not checked yet", send(alice, p2p, "mine-1", unchecked), http.StatusCreated, "ok")
	expect(t, "alice sends her pending file", send(alice, p2p, "mine-2", pending), http.StatusCreated, "ok")
	expect(t, "alice shares her approved file", send(alice, p2p, "mine-3", approved), http.StatusCreated, "ok")
	s.project(t)
	expect(t, "bob's URL of the shared file", fileURL(bob, approved), http.StatusOK, "ok")
	expect(t, "bob forwards the shared file", send(bob, bobs, "fwd", approved), http.StatusCreated, "ok")
	expect(t, "bob forwards a shared file not checked yet", send(bob, bobs, "fwd-2", unchecked), http.StatusForbidden, domain.ReasonFileNotReadable)
}

// TestFileCreateRefusesHeaderBreakingInput: a content type that does not parse as a media type
// (CR/LF, an unterminated quote) and a name with control characters are 400 invalid at creation
// and write nothing; a content type that parses is stored as mime.FormatMediaType writes it.
func TestFileCreateRefusesHeaderBreakingInput(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true, files: true})
	_, alice := s.user(t, "alice")
	events := func() int { return s.count(t, `SELECT count(*) FROM events WHERE tenant_id = $1`, s.tenant.String()) }
	before := events()
	for i, c := range []struct{ name, ctype, field, reason string }{
		{"a.html", "text/html\r\nX-Evil: 1", "content_type", "bad_format"},
		{"a.txt", `a/b; x="`, "content_type", "bad_format"},
		{"a.txt", "text/plain; charset", "content_type", "bad_format"},
		{"a.txt", "textplain", "content_type", "bad_format"},
		{"a.txt", "text/plain\x7f", "content_type", "bad_format"},
		{"a\r\nX-Evil: 1.txt", "text/plain", "name", "bad_text"},
		{"a\nb.txt", "text/plain", "name", "bad_text"},
		{"a\u0085b.txt", "text/plain", "name", "bad_text"},
	} {
		body, _ := json.Marshal(map[string]string{"name": c.name, "content_type": c.ctype, "size": "5"})
		a := s.do(t, req{method: http.MethodPost, path: "/v1/im/files", token: alice, key: fmt.Sprintf("bad-%d", i), body: string(body)})
		expect(t, fmt.Sprintf("create %q %q", c.name, c.ctype), a, http.StatusBadRequest, "invalid")
		if a.Body.Details["field"] != c.field || a.Body.Details["reason"] != c.reason {
			t.Errorf("create %q %q: details %v, want %s/%s", c.name, c.ctype, a.Body.Details, c.field, c.reason)
		}
	}
	if n := events(); n != before {
		t.Fatalf("the refused files wrote %d events", n-before)
	}
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/files", token: alice, key: "good",
		body: `{"name":"notes.txt","content_type":"Text/Plain;Charset=utf-8","size":"5"}`})
	expect(t, "create with a content type to normalise", a, http.StatusCreated, "ok")
	id := a.data(t)["file_id"].(string)
	if ct := a.data(t)["content_type"]; ct != "text/plain; charset=utf-8" {
		t.Fatalf("content type answered %q, want text/plain; charset=utf-8", ct)
	}
	if f, err := s.files.Get(testCtx(t), s.tenant, id); err != nil || f.ContentType != "text/plain; charset=utf-8" {
		t.Fatalf("content type stored %q (%v), want text/plain; charset=utf-8", f.ContentType, err)
	}
}

// TestEmptyUploadIsSizeMismatch: an upload with no bytes, whatever Content-Type it names or
// none, is the upload's own answer, 400 invalid body/size_mismatch, never a JSON decoding error.
func TestEmptyUploadIsSizeMismatch(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true, files: true})
	_, alice := s.user(t, "alice")
	id := s.createFile(t, alice, "k1", "a.txt", "text/plain", 5)
	for i, ct := range []string{"application/octet-stream", "", "application/json", "text/plain"} {
		for _, chunked := range []bool{false, true} {
			hr, err := http.NewRequestWithContext(testCtx(t), http.MethodPut, s.srv.URL+"/v1/im/files/"+id+"/content", io.NopCloser(strings.NewReader("")))
			if err != nil {
				t.Fatal(err)
			}
			hr.ContentLength = 0
			if chunked {
				hr.ContentLength = -1
			}
			if ct != "" {
				hr.Header.Set("Content-Type", ct)
			}
			hr.Header.Set("Authorization", "Bearer "+alice)
			hr.Header.Set(rest.HeaderIdempotencyKey, fmt.Sprintf("empty-%d-%v", i, chunked))
			resp, err := s.srv.Client().Do(hr)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			var a answer
			a.Status, a.Raw = resp.StatusCode, string(raw)
			if err := json.Unmarshal(raw, &a.Body); err != nil {
				t.Fatalf("empty upload as %q: not the envelope: %s", ct, raw)
			}
			expect(t, fmt.Sprintf("empty upload as %q (chunked %v)", ct, chunked), a, http.StatusBadRequest, rest.ReasonInvalid)
			if a.Body.Details["field"] != "body" || a.Body.Details["reason"] != "size_mismatch" {
				t.Errorf("empty upload as %q (chunked %v): details %v, want body/size_mismatch", ct, chunked, a.Body.Details)
			}
		}
	}
}

// TestDownloadRouteIsDocumentedAndAnswersTheEnvelope: GET /v1/im/files/{id}/content is in the
// OpenAPI document (public, with its statuses and reasons), and its errors are the JSON envelope
// with one of the documented reasons: a bad or expired signature 403 signature_invalid, a
// rejected file 403 file_rejected, an unknown file 404 not_found.
func TestDownloadRouteIsDocumentedAndAnswersTheEnvelope(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true, files: true})
	op, ok := s.apiDoc(t).Paths[rest.DownloadPath]["get"]
	if !ok || op.OperationID != "download-file" || len(op.Security) != 0 {
		t.Fatalf("GET %s in the document: %v %+v, want operation download-file without security", rest.DownloadPath, ok, op)
	}
	signer := rest.FileURLSigner{Key: []byte("file-url-key"), TTL: time.Minute} // the stack's
	mux := http.NewServeMux()
	mux.Handle("GET "+rest.DownloadPath, rest.FileDownload(s.files, signer, nil))
	srv := httptest.NewServer(rest.RouteErrors(mux))
	t.Cleanup(srv.Close)

	_, alice := s.user(t, "alice")
	body := []byte("some text\n")
	good := s.createFile(t, alice, "k1", "notes.txt", "text/plain", len(body))
	expect(t, "upload", s.putContent(t, alice, "k2", good, bytes.NewReader(body), int64(len(body))), http.StatusOK, "ok")
	html := []byte("<html><body>not an image</body></html>")
	bad := s.createFile(t, alice, "k3", "evil.png", "image/png", len(html))
	expect(t, "upload", s.putContent(t, alice, "k4", bad, bytes.NewReader(html), int64(len(html))), http.StatusOK, "ok")
	for _, task := range s.fileQueue.take() {
		if err := s.files.Check(testCtx(t), task); err != nil {
			t.Fatal(err)
		}
	}
	sign := func(id string, at time.Time) string { p, _ := signer.Sign(s.tenant, id, at); return p }
	goodPath := sign(good, time.Now())
	for _, c := range []struct {
		what, path string
		status     int
		reason     string
	}{
		{"a changed signature", strings.Replace(goodPath, "sig=", "sig=0", 1), http.StatusForbidden, rest.ReasonSignatureInvalid},
		{"an expired URL", sign(good, time.Now().Add(-2*time.Minute)), http.StatusForbidden, rest.ReasonSignatureInvalid},
		{"a rejected file", sign(bad, time.Now()), http.StatusForbidden, "file_rejected"},
		{"an unknown file", sign("01a23b00-0000-7000-8000-000000000000", time.Now()), http.StatusNotFound, rest.ReasonNotFound},
	} {
		resp, err := srv.Client().Get(srv.URL + c.path)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var env struct {
			Code      int    `json:"code"`
			Reason    string `json:"reason"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal(raw, &env); err != nil || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: not the envelope (%s): %q", c.what, resp.Header.Get("Content-Type"), raw)
		}
		if resp.StatusCode != c.status || env.Code != c.status || env.Reason != c.reason || env.Message == "" ||
			env.RequestID == "" || env.RequestID != resp.Header.Get(rest.HeaderRequestID) {
			t.Errorf("%s: %d %s, want %d %s", c.what, resp.StatusCode, raw, c.status, c.reason)
		}
		if r, ok := op.Responses[strconv.Itoa(resp.StatusCode)]; !ok || !slices.Contains(r.Reasons, env.Reason) {
			t.Errorf("%s: %d %s is not documented: %+v", c.what, resp.StatusCode, env.Reason, op.Responses)
		}
	}
	resp, err := srv.Client().Get(srv.URL + goodPath)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
		t.Fatalf("signed download: %d %q", resp.StatusCode, got)
	}
}

// TestUploadMemoryIsSharedFairly: one user holds at most one largest upload's worth of the
// node's upload memory and one tenant at most half of it, so a user's or a tenant's uploads that
// arrive slowly never keep another tenant's uploads out; beyond its share an upload is 429
// rate_limited at once, and nothing of it is stored.
func TestUploadMemoryIsSharedFairly(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	s := newStack(t, rest.Config{MaxFileBytes: 4 * mib, UploadMemory: 12 * mib}, stackOpts{reads: true, files: true})
	_, alice := s.user(t, "alice")
	_, bob := s.user(t, "bob")
	slow := s.createFile(t, alice, "c1", "slow.bin", "application/octet-stream", 4*mib)
	pr, pw := io.Pipe()
	done := make(chan answer, 1)
	go func() { done <- s.putContent(t, alice, "u1", slow, pr, 4*mib) }()
	if _, err := pw.Write(make([]byte, mib)); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, s, 4*mib)

	limited := func(what string, a answer, limit string) {
		t.Helper()
		expect(t, what, a, http.StatusTooManyRequests, rest.ReasonRateLimited)
		if a.Body.Details["limit"] != limit || a.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: %s, want limit %s and Retry-After", what, a.Raw, limit)
		}
	}
	more := s.createFile(t, alice, "c2", "more.bin", "application/octet-stream", 2*mib)
	limited("alice's second upload", s.putContent(t, alice, "u2", more, bytes.NewReader(make([]byte, 2*mib)), 2*mib), "upload_memory_user")
	big := s.createFile(t, bob, "c3", "big.bin", "application/octet-stream", 3*mib)
	limited("bob's upload over the tenant's half", s.putContent(t, bob, "u3", big, bytes.NewReader(make([]byte, 3*mib)), 3*mib), "upload_memory_tenant")
	small := s.createFile(t, bob, "c4", "small.bin", "application/octet-stream", 2*mib)
	expect(t, "bob's upload within the tenant's half", s.putContent(t, bob, "u4", small, bytes.NewReader(make([]byte, 2*mib)), 2*mib), http.StatusOK, "ok")

	// Another tenant uploads as much as one user may while the first tenant holds its half.
	carol := s.otherTenantUser(t, "carol")
	theirs := s.createFile(t, carol, "c5", "theirs.bin", "application/octet-stream", 4*mib)
	expect(t, "another tenant's upload", s.putContent(t, carol, "u5", theirs, bytes.NewReader(make([]byte, 4*mib)), 4*mib), http.StatusOK, "ok")

	if _, err := pw.Write(make([]byte, 3*mib)); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	expect(t, "alice's slow upload", <-done, http.StatusOK, "ok")
	waitHeld(t, s, 0)
	expect(t, "alice's second upload, retried", s.putContent(t, alice, "u2", more, bytes.NewReader(make([]byte, 2*mib)), 2*mib), http.StatusOK, "ok")
}

// TestStalledUploadEnds: an upload whose body stops arriving for the idle timeout ends with 408
// request_timeout, gives its memory back and stores nothing; the file can be uploaded again.
func TestStalledUploadEnds(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	s := newStack(t, rest.Config{MaxFileBytes: 2 * mib, UploadIdleTimeout: 300 * time.Millisecond}, stackOpts{reads: true, files: true})
	_, alice := s.user(t, "alice")
	id := s.createFile(t, alice, "c1", "stalled.bin", "application/octet-stream", 2*mib)
	pr, pw := io.Pipe()
	defer pw.Close()
	done := make(chan answer, 1)
	go func() { done <- s.putContent(t, alice, "u1", id, pr, 2*mib) }()
	if _, err := pw.Write(make([]byte, mib)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case a := <-done:
		expect(t, "a stalled upload", a, http.StatusRequestTimeout, rest.ReasonRequestTimeout)
	case <-time.After(10 * time.Second):
		t.Fatal("a stalled upload still runs 10 s after its body stopped")
	}
	t.Logf("ended %s after the body stopped", time.Since(start).Round(time.Millisecond))
	waitHeld(t, s, 0)
	a := s.do(t, req{method: http.MethodGet, path: "/v1/im/files/" + id, token: alice})
	if a.Status != http.StatusOK || a.data(t)["status"] != domain.FileStatusPending {
		t.Fatalf("the file after a stalled upload: %s, want it still pending", a.Raw)
	}
	expect(t, "the upload again", s.putContent(t, alice, "u2", id, bytes.NewReader(make([]byte, 2*mib)), 2*mib), http.StatusOK, "ok")
}

// otherTenantUser registers login in a tenant of its own, provisioned for reads and files, and
// returns the user's token.
func (s *stack) otherTenantUser(t *testing.T, login string) string {
	t.Helper()
	other := domain.MustTenantID(testenv.UniqueName("rest"))
	testenv.DropMySQLDatabasesAtCleanup(t, s.router.DatabaseName(other))
	if err := s.router.Provision(testCtx(t), other); err != nil {
		t.Fatal(err)
	}
	creds := `{"tenant":"` + other.String() + `","login":"` + login + `","password":"password-` + login + `"}`
	expect(t, "register "+login, s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/register", body: creds}), http.StatusCreated, "ok")
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/auth/login", body: creds})
	expect(t, "login "+login, a, http.StatusOK, "ok")
	return a.data(t)["token"].(string)
}

// waitHeld waits until the node's uploads hold want bytes: an upload takes its share once its
// handler runs (the bytes a client wrote may still sit in socket buffers before), and gives it
// back when its request ends.
func waitHeld(t *testing.T, s *stack, want int64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.api.UploadBytesHeld() != want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("uploads hold %d bytes after 10 s, want %d", s.api.UploadBytesHeld(), want)
		}
	}
}
