package rest_test

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/rest"
)

// TestDirectUploadAndDownloadThroughObjectStorage: with a bucket that signs URLs, the uploader's
// create answer carries direct_upload; the bytes go straight to object storage, POST …/complete
// records them, another user never gets an upload URL, and the download URL is a signed
// object-storage URL that serves the bytes with the file's type.
func TestDirectUploadAndDownloadThroughObjectStorage(t *testing.T) {
	t.Parallel()
	s := newStack(t, rest.Config{}, stackOpts{reads: true, files: true, s3: true})
	_, alice := s.user(t, "alice")
	_, bob := s.user(t, "bob")
	body := bytes.Repeat([]byte("straight to the bucket\n"), 200)
	a := s.do(t, req{method: http.MethodPost, path: "/v1/im/files", token: alice, key: "c1",
		body: `{"name":"notes.txt","content_type":"text/plain","size":"` + strconv.Itoa(len(body)) + `"}`})
	expect(t, "create", a, http.StatusCreated, "ok")
	d := a.data(t)
	id := d["file_id"].(string)
	direct, _ := d["direct_upload"].(map[string]any)
	if direct == nil || direct["method"] != http.MethodPut || !strings.HasPrefix(direct["url"].(string), "http") {
		t.Fatalf("create answer %s: want direct_upload with a PUT URL", a.Raw)
	}
	if d["upload_url"] != "/v1/im/files/"+id+"/content" {
		t.Errorf("upload_url %v: the API path stays the fallback", d["upload_url"])
	}
	b := s.do(t, req{method: http.MethodGet, path: "/v1/im/files/" + id, token: bob})
	if b.Status == http.StatusOK && strings.Contains(b.Raw, "direct_upload") {
		t.Fatalf("another user's view of the file carries an upload URL: %s", b.Raw)
	}
	a = s.do(t, req{method: http.MethodPost, path: "/v1/im/files/" + id + "/complete", token: alice, key: "k0"})
	expect(t, "complete before the bytes", a, http.StatusBadRequest, rest.ReasonInvalid)
	put, err := http.NewRequestWithContext(testCtx(t), http.MethodPut, direct["url"].(string), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(put)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT to the signed URL: %d", resp.StatusCode)
	}
	a = s.do(t, req{method: http.MethodPost, path: "/v1/im/files/" + id + "/complete", token: alice, key: "k1"})
	expect(t, "complete", a, http.StatusOK, "ok")
	if d := a.data(t); d["status"] != domain.FileStatusUploaded || d["direct_upload"] != nil {
		t.Fatalf("complete answer %s: want uploaded, no upload URL", a.Raw)
	}
	s.checkFiles(t)
	a = s.do(t, req{method: http.MethodGet, path: "/v1/im/files/" + id + "/url", token: alice})
	expect(t, "download URL", a, http.StatusOK, "ok")
	u := a.data(t)["url"].(string)
	if !strings.HasPrefix(u, "http") || !strings.Contains(u, "X-Amz-Signature=") {
		t.Fatalf("download URL %q: want a signed object-storage URL", u)
	}
	resp, err = http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("download: %d %q, %d bytes (equal %v)", resp.StatusCode, resp.Header.Get("Content-Type"), len(got), bytes.Equal(got, body))
	}
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment") {
		t.Errorf("download Content-Disposition %q, want an attachment", cd)
	}
}
