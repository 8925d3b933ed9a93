package rest_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/imledger/imledger/domain"
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
	first := s.createFile(t, alice, "c1", "a.bin", "application/octet-stream", 3*mib)
	second := s.createFile(t, alice, "c2", "b.bin", "application/octet-stream", 2*mib)
	pr, pw := io.Pipe()
	done := make(chan answer, 1)
	go func() { done <- s.putContent(t, alice, "u1", first, pr, 3*mib) }()
	if _, err := pw.Write(make([]byte, mib)); err != nil { // the first upload is being read
		t.Fatal(err)
	}
	a := s.putContent(t, alice, "u2", second, bytes.NewReader(make([]byte, 2*mib)), 2*mib)
	expect(t, "an upload beyond UploadMemory", a, http.StatusServiceUnavailable, rest.ReasonRetry)
	if a.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	if _, err := pw.Write(make([]byte, 2*mib)); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	expect(t, "the first upload", <-done, http.StatusOK, "ok")
	expect(t, "the second upload, retried", s.putContent(t, alice, "u2", second, bytes.NewReader(make([]byte, 2*mib)), 2*mib),
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
