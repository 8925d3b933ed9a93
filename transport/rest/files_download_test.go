package rest_test

import (
	"bytes"
	"context"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob/fileblob"

	"github.com/imledger/imledger/commands/files"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/filedb"
	"github.com/imledger/imledger/readmodels/tenantdb"
	"github.com/imledger/imledger/transport/rest"
)

// checkQueue keeps the security checks queued, for the test to run them.
type checkQueue struct {
	mu    sync.Mutex
	tasks []files.CheckTask
}

func (q *checkQueue) EnqueueCheck(_ context.Context, t files.CheckTask) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.tasks = append(q.tasks, t)
	return nil
}

// take returns the checks queued since the last take.
func (q *checkQueue) take() []files.CheckTask {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.tasks
	q.tasks = nil
	return out
}

// downloadService is a file service over a new tenant's read model and a bucket in a temporary
// directory, with its security checks queued for the test to run.
func downloadService(t *testing.T) (*files.Service, domain.TenantID, *checkQueue) {
	t.Helper()
	ctx := testenv.Context(t)
	_, store := storetest.EventStore(t, 4)
	testenv.MySQLServer(t)
	r, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	tenant := domain.MustTenantID(testenv.UniqueName("dl"))
	testenv.DropMySQLDatabasesAtCleanup(t, r.DatabaseName(tenant))
	if err := r.Provision(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	bucket, err := fileblob.OpenBucket(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bucket.Close() })
	q := &checkQueue{}
	svc, err := files.New(files.Deps{Bucket: bucket, Records: filedb.New(r), Events: store, Queue: q}, files.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return svc, tenant, q
}

// TestSignedDownloadIsByteEqual: a file uploaded through the service is served byte for byte at
// its signed URL without a token; a changed signature, an expired URL and a rejected file are 403.
func TestSignedDownloadIsByteEqual(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	svc, tenant, q := downloadService(t)
	upload := func(name, ctype string, body []byte) domain.FileRecord {
		f, err := svc.Create(ctx, files.CreateFile{Tenant: tenant, Uploader: 7, Name: name, ContentType: ctype, Size: int64(len(body))})
		if err != nil {
			t.Fatal(err)
		}
		if f, err = svc.Upload(ctx, tenant, 7, f.ID, bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		return f
	}
	body := bytes.Repeat([]byte("imledger file bytes\n"), 3000)
	good := upload("notes.txt", "text/plain", body)
	bad := upload("evil.png", "image/png", []byte("<html><body>not an image</body></html>"))
	for _, task := range q.take() {
		if err := svc.Check(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	signer := rest.FileURLSigner{Key: []byte("k"), TTL: time.Minute}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/im/files/{id}/content", rest.FileDownload(svc, signer, nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	get := func(path string) (int, []byte) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	path, _ := signer.Sign(tenant, good.ID, time.Now())
	if code, got := get(path); code != http.StatusOK || !bytes.Equal(got, body) {
		t.Fatalf("signed download: %d, %d bytes; want 200 and the %d bytes uploaded", code, len(got), len(body))
	}
	if code, _ := get(strings.Replace(path, "sig=", "sig=0", 1)); code != http.StatusForbidden {
		t.Fatalf("changed signature: %d, want 403", code)
	}
	old, _ := signer.Sign(tenant, good.ID, time.Now().Add(-2*time.Minute))
	if code, _ := get(old); code != http.StatusForbidden {
		t.Fatalf("expired URL: %d, want 403", code)
	}
	rejected, _ := signer.Sign(tenant, bad.ID, time.Now())
	if code, got := get(rejected); code != http.StatusForbidden || bytes.Contains(got, []byte("html")) {
		t.Fatalf("rejected file: %d %q, want 403 without its bytes", code, got)
	}
}

// TestDownloadHeadersCarryNameAndTypeSafely: the download's Content-Disposition names the file
// with its exact name, whatever characters it holds (quotes, semicolons, '=', non-ASCII), as
// mime.ParseMediaType reads it back, and its Content-Type is the normalised type.
func TestDownloadHeadersCarryNameAndTypeSafely(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	svc, tenant, _ := downloadService(t)
	signer := rest.FileURLSigner{Key: []byte("k"), TTL: time.Minute}
	mux := http.NewServeMux()
	mux.Handle("GET /v1/im/files/{id}/content", rest.FileDownload(svc, signer, nil))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	body := []byte("plain text bytes\n")
	for _, name := range []string{`résumé "final"; x=1.txt`, `a=b.txt`, `plain name.txt`, `quote"mark.txt`} {
		f, err := svc.Create(ctx, files.CreateFile{Tenant: tenant, Uploader: 7, Name: name, ContentType: "TEXT/plain; Charset=UTF-8", Size: int64(len(body))})
		if err != nil {
			t.Fatalf("create %q: %v", name, err)
		}
		if _, err := svc.Upload(ctx, tenant, 7, f.ID, bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		path, _ := signer.Sign(tenant, f.ID, time.Now())
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("download %q: %d", name, resp.StatusCode)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=UTF-8" {
			t.Errorf("download %q: Content-Type %q, want text/plain; charset=UTF-8", name, ct)
		}
		cd := resp.Header.Get("Content-Disposition")
		disp, params, err := mime.ParseMediaType(cd)
		if err != nil || disp != "attachment" || params["filename"] != name {
			t.Errorf("download %q: Content-Disposition %q reads as %q %q (%v)", name, cd, disp, params["filename"], err)
		}
	}
}

// tenantStatus is a rest.TenantChecker whose answer the test sets.
type tenantStatus struct {
	mu  sync.Mutex
	err error
}

func (s *tenantStatus) CheckTenant(context.Context, domain.TenantID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *tenantStatus) set(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// TestSignedDownloadOfSuspendedTenantIsRefused: a URL signed while its tenant was active serves
// nothing once the tenant is suspended (403 tenant_suspended, without the bytes), and serves the
// file again once it is resumed.
func TestSignedDownloadOfSuspendedTenantIsRefused(t *testing.T) {
	t.Parallel()
	ctx := testenv.Context(t)
	svc, tenant, _ := downloadService(t)
	body := []byte("tenant file bytes\n")
	f, err := svc.Create(ctx, files.CreateFile{Tenant: tenant, Uploader: 7, Name: "a.txt", ContentType: "text/plain", Size: int64(len(body))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Upload(ctx, tenant, 7, f.ID, bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	signer := rest.FileURLSigner{Key: []byte("k"), TTL: time.Minute}
	status := &tenantStatus{}
	mux := http.NewServeMux()
	mux.Handle("GET "+rest.DownloadPath, rest.FileDownload(svc, signer, status))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	path, _ := signer.Sign(tenant, f.ID, time.Now())
	get := func() (int, []byte) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if code, got := get(); code != http.StatusOK || !bytes.Equal(got, body) {
		t.Fatalf("active tenant: %d %q, want 200 and the bytes", code, got)
	}
	status.set(domain.Deny(domain.ReasonTenantSuspended))
	if code, got := get(); code != http.StatusForbidden || !bytes.Contains(got, []byte(`"tenant_suspended"`)) || bytes.Contains(got, body) {
		t.Fatalf("suspended tenant: %d %q, want 403 tenant_suspended without the bytes", code, got)
	}
	status.set(nil)
	if code, got := get(); code != http.StatusOK || !bytes.Equal(got, body) {
		t.Fatalf("resumed tenant: %d %q, want 200 and the bytes", code, got)
	}
}
