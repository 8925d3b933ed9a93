package files_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/imledger/imledger/commands/files"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// httpDo sends a request without a token, as a client does to a signed URL.
func httpDo(t *testing.T, method, url string, body []byte) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == nil {
		req.Body = http.NoBody
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b, res.Header
}

// TestDirectUploadThroughSignedURLs uploads a file straight to S3-compatible object storage with
// the signed URL the service hands out, completes it, overwrites the object through the same
// still-valid URL, and downloads it through a signed URL: what is served is what was hashed.
func TestDirectUploadThroughSignedURLs(t *testing.T) {
	f := setup(t)
	bucket := testenv.S3Bucket(t)
	svc, err := files.New(files.Deps{Bucket: bucket, Records: f.db, Events: f.store, Queue: f.queue, Now: f.clock},
		files.Config{GCGrace: time.Hour, MaxBytes: 1 << 20, DirectURLs: true})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("direct upload bytes "), 500)
	rec, err := svc.Create(f.ctx, files.CreateFile{Tenant: f.tenant, Uploader: 7, Name: "report.txt", ContentType: "text/plain", Size: int64(len(body))})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := svc.DirectUpload(f.ctx, rec, 8); ok || err != nil {
		t.Fatalf("a URL for another user than the uploader: ok %v err %v", ok, err)
	}
	up, ok, err := svc.DirectUpload(f.ctx, rec, 7)
	if err != nil || !ok {
		t.Fatalf("direct upload URL: ok %v err %v", ok, err)
	}
	if up.Method != http.MethodPut || !strings.Contains(up.URL, "X-Amz-Signature=") || !up.ExpiresAt.After(f.clock()) {
		t.Fatalf("direct upload URL %+v: want a signed PUT URL that expires later", up)
	}
	if _, err := svc.Complete(f.ctx, f.tenant, 7, rec.ID); !errors.Is(err, files.ErrNotUploaded) {
		t.Fatalf("complete before the bytes: %v, want ErrNotUploaded", err)
	}
	if code, b, _ := httpDo(t, up.Method, up.URL, body); code != http.StatusOK {
		t.Fatalf("PUT to the signed URL: %d %s", code, b)
	}
	done, err := svc.Complete(f.ctx, f.tenant, 7, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	if done.Status != domain.FileStatusUploaded || done.SHA256 != hex.EncodeToString(sum[:]) || done.ObjectKey == rec.ObjectKey {
		t.Fatalf("completed %+v: want uploaded, the body's digest, and a key of its own (not %s)", done, rec.ObjectKey)
	}
	// The URL still works until it expires: what it writes now is never served.
	if code, b, _ := httpDo(t, up.Method, up.URL, bytes.Repeat([]byte("X"), len(body))); code != http.StatusOK {
		t.Fatalf("PUT again: %d %s", code, b)
	}
	stored, err := f.db.Get(f.ctx, f.tenant, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	dl, ok, err := svc.DirectDownload(f.ctx, stored, `attachment; filename="report.txt"`)
	if err != nil || !ok {
		t.Fatalf("direct download URL: ok %v err %v", ok, err)
	}
	code, got, hdr := httpDo(t, http.MethodGet, dl.URL, nil)
	if code != http.StatusOK || !bytes.Equal(got, body) {
		t.Fatalf("GET the signed URL: %d, %d bytes (equal %v)", code, len(got), bytes.Equal(got, body))
	}
	if ct := hdr.Get("Content-Type"); ct != "text/plain" {
		t.Errorf("download Content-Type %q, want the file's", ct)
	}
	if len(f.queue.tasks) != 1 || f.queue.tasks[0].ObjectKey != done.ObjectKey {
		t.Errorf("security check tasks %+v, want one of the recorded object", f.queue.tasks)
	}
}

// TestDirectUploadOfTheWrongSizeIsNotRecorded: an object of another size than declared is refused
// at completion and nothing is recorded; the right bytes complete it afterwards.
func TestDirectUploadOfTheWrongSizeIsNotRecorded(t *testing.T) {
	f := setup(t)
	svc, err := files.New(files.Deps{Bucket: testenv.S3Bucket(t), Records: f.db, Events: f.store, Queue: f.queue, Now: f.clock},
		files.Config{GCGrace: time.Hour, MaxBytes: 1 << 20, DirectURLs: true})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := svc.Create(f.ctx, files.CreateFile{Tenant: f.tenant, Uploader: 7, Name: "a.bin", ContentType: "application/octet-stream", Size: 10})
	if err != nil {
		t.Fatal(err)
	}
	up, _, err := svc.DirectUpload(f.ctx, rec, 7)
	if err != nil {
		t.Fatal(err)
	}
	httpDo(t, up.Method, up.URL, []byte("too short"))
	var ve *domain.ValidationError
	if _, err := svc.Complete(f.ctx, f.tenant, 7, rec.ID); !errors.As(err, &ve) || ve.Reason != "size_mismatch" {
		t.Fatalf("complete of 9 bytes declared as 10: %v, want size_mismatch", err)
	}
	if got, _ := f.db.Get(f.ctx, f.tenant, rec.ID); got.Status != domain.FileStatusPending {
		t.Fatalf("status after a refused completion %q, want pending", got.Status)
	}
	httpDo(t, up.Method, up.URL, []byte("0123456789"))
	if done, err := svc.Complete(f.ctx, f.tenant, 7, rec.ID); err != nil || done.Status != domain.FileStatusUploaded {
		t.Fatalf("complete of the right bytes: %+v %v", done, err)
	}
}

// TestNoDirectURLsFromALocalDirectory: a bucket that cannot sign (the local directory) and the
// switch turned off both leave uploads and downloads to the API.
func TestNoDirectURLsFromALocalDirectory(t *testing.T) {
	f := setup(t)
	rec, err := f.svc.Create(f.ctx, files.CreateFile{Tenant: f.tenant, Uploader: 7, Name: "a.txt", ContentType: "text/plain", Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	for name, svc := range map[string]*files.Service{"local directory": mustService(t, f, f.bucket, true), "switched off": mustService(t, f, testenv.S3Bucket(t), false)} {
		if _, ok, err := svc.DirectUpload(f.ctx, rec, 7); ok || err != nil {
			t.Errorf("%s: direct upload ok %v err %v, want none", name, ok, err)
		}
	}
}

func mustService(t *testing.T, f *fixture, b *blob.Bucket, direct bool) *files.Service {
	t.Helper()
	svc, err := files.New(files.Deps{Bucket: b, Records: f.db, Events: f.store, Queue: f.queue, Now: f.clock},
		files.Config{GCGrace: time.Hour, MaxBytes: 1 << 20, DirectURLs: direct})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}
