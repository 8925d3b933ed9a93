package files_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/files"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/filedb"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

type fixture struct {
	ctx    context.Context
	tenant domain.TenantID
	store  *eventstore.Store
	db     *filedb.Store
	svc    *files.Service
	bucket *blob.Bucket
	queue  *queue
	told   *notifier
	now    time.Time
	mu     sync.Mutex
}

// queue keeps the check tasks the service queued, for the test to run them.
type queue struct {
	mu    sync.Mutex
	tasks []files.CheckTask
}

func (q *queue) EnqueueCheck(_ context.Context, t files.CheckTask) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.tasks = append(q.tasks, t)
	return nil
}

type notice struct {
	uploader domain.UserID
	file     string
	reason   string
}

type notifier struct {
	mu   sync.Mutex
	told []notice
}

func (n *notifier) FileRejected(_ context.Context, _ domain.TenantID, uploader domain.UserID, fileID, reason string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.told = append(n.told, notice{uploader, fileID, reason})
}

func setup(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{ctx: testenv.Context(t), queue: &queue{}, told: &notifier{}, now: time.Now()}
	_, f.store = storetest.EventStore(t, 4)
	testenv.MySQLServer(t)
	r, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	f.tenant = domain.MustTenantID(testenv.UniqueName("files"))
	testenv.DropMySQLDatabasesAtCleanup(t, r.DatabaseName(f.tenant))
	if err := r.Provision(f.ctx, f.tenant); err != nil {
		t.Fatal(err)
	}
	f.db = filedb.New(r)
	bucket, err := fileblob.OpenBucket(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bucket.Close() })
	f.bucket = bucket
	if f.svc, err = files.New(files.Deps{Bucket: bucket, Records: f.db, Events: f.store, Queue: f.queue, Notifier: f.told,
		Now: f.clock}, files.Config{GCGrace: time.Hour, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func (f *fixture) upload(t *testing.T, uploader domain.UserID, name, ctype string, body []byte) domain.FileRecord {
	t.Helper()
	rec, err := f.svc.Create(f.ctx, files.CreateFile{Tenant: f.tenant, Uploader: uploader, Name: name, ContentType: ctype, Size: int64(len(body))})
	if err != nil {
		t.Fatal(err)
	}
	if rec, err = f.svc.Upload(f.ctx, f.tenant, uploader, rec.ID, bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	return rec
}

// reference applies a sent message carrying the files, as the files-refs projection does.
func (f *fixture) reference(t *testing.T, topic string, seq int64, from domain.UserID, ids ...string) {
	t.Helper()
	tp, err := domain.ParseTopic(topic)
	if err != nil {
		t.Fatal(err)
	}
	p := domain.MessageSent{MessageID: "m", Topic: topic, Seq: seq, From: from, GroupID: tp.GroupID(), MsgType: "file",
		Content: []byte(`{"text":"see attached"}`), Head: domain.Head{Files: ids}, SentAt: time.Now().UTC()}
	e, err := domain.NewEnvelope(f.tenant, topic, seq, domain.EventGroupMessageSent, domain.Actor{Type: domain.ActorUser, ID: from.String()}, p)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // a redelivery adds nothing
		if _, err := f.db.Apply(f.ctx, f.tenant, []domain.Envelope{e}); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) runChecks(t *testing.T) {
	t.Helper()
	f.queue.mu.Lock()
	tasks := f.queue.tasks
	f.queue.tasks = nil
	f.queue.mu.Unlock()
	for _, task := range tasks {
		if err := f.svc.Check(f.ctx, task); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) events(t *testing.T, id string) []domain.EventType {
	t.Helper()
	envs, err := f.store.ReadAll(f.ctx, eventstore.Filter{Tenant: f.tenant}, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []domain.EventType
	for _, e := range envs {
		if e.StreamID == "file:"+id {
			out = append(out, e.EventType)
		}
	}
	return out
}

// Upload, reference from a message, check, then read back through the service: the bytes are
// equal, the record counts the reference, and every state change is an event.
func TestUploadReferenceDownload(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 5000)...)
	rec := f.upload(t, 42, "cat.png", "image/png", body)
	f.reference(t, "grp7", 3, 42, rec.ID)
	f.runChecks(t)
	got, err := f.svc.Get(f.ctx, f.tenant, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.RefCount != 1 || got.Audit != domain.FileAuditApproved || got.Status != domain.FileStatusUploaded || got.SHA256 == "" {
		t.Fatalf("record %+v, want uploaded, approved, 1 reference", got)
	}
	_, r, err := f.svc.Open(f.ctx, f.tenant, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, body) {
		t.Fatalf("downloaded %d bytes differ from the %d uploaded", len(b), len(body))
	}
	want := []domain.EventType{domain.EventFileCreated, domain.EventFileUploaded, domain.EventFileAudited}
	if ev := f.events(t, rec.ID); len(ev) != 3 || ev[0] != want[0] || ev[1] != want[1] || ev[2] != want[2] {
		t.Fatalf("events %v, want %v", ev, want)
	}
}

// Past the grace period the collector deletes an unreferenced file (its bytes too) and keeps a
// referenced one; before it, it deletes nothing.
func TestCollectUnreferencedAfterGrace(t *testing.T) {
	t.Parallel()
	f := setup(t)
	kept := f.upload(t, 42, "a.txt", "text/plain", []byte("referenced"))
	gone := f.upload(t, 42, "b.txt", "text/plain", []byte("orphan"))
	f.reference(t, "grp9", 1, 42, kept.ID)
	if n, err := f.svc.Collect(f.ctx, f.tenant); err != nil || n != 0 {
		t.Fatalf("collect within the grace period: %d, %v; want 0", n, err)
	}
	f.advance(2 * time.Hour)
	if n, err := f.svc.Collect(f.ctx, f.tenant); err != nil || n != 1 {
		t.Fatalf("collect after the grace period: %d, %v; want 1", n, err)
	}
	if _, _, err := f.svc.Open(f.ctx, f.tenant, gone.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("open a collected file: %v, want not found", err)
	}
	if _, r, err := f.svc.Open(f.ctx, f.tenant, kept.ID); err != nil {
		t.Fatalf("open the referenced file: %v", err)
	} else {
		r.Close()
	}
	if ev := f.events(t, gone.ID); ev[len(ev)-1] != domain.EventFileDeleted {
		t.Fatalf("events of the collected file %v, want file.deleted.v1 last", ev)
	}
}

// A file whose bytes are not what it declares (HTML declared as an image) is rejected: it cannot
// be opened, and its uploader is told once.
func TestRejectedFileNotServedUploaderTold(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rec := f.upload(t, 42, "x.png", "image/png", []byte("<html><script>alert(1)</script></html>"))
	f.runChecks(t)
	if _, _, err := f.svc.Open(f.ctx, f.tenant, rec.ID); !errors.Is(err, files.ErrRejected) {
		t.Fatalf("open a rejected file: %v, want %v", err, files.ErrRejected)
	}
	if len(f.told.told) != 1 || f.told.told[0] != (notice{42, rec.ID, "type_mismatch"}) {
		t.Fatalf("uploader told %+v, want one type_mismatch for 42", f.told.told)
	}
}

// Bad metadata changes nothing; a body of another size than declared is refused and leaves the
// file pending; only the uploader may upload.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, c := range []files.CreateFile{
		{Tenant: f.tenant, Uploader: 1, Name: "", ContentType: "image/png", Size: 3},
		{Tenant: f.tenant, Uploader: 1, Name: "a/b", ContentType: "image/png", Size: 3},
		{Tenant: f.tenant, Uploader: 1, Name: "a", ContentType: "png", Size: 3},
		{Tenant: f.tenant, Uploader: 1, Name: "a", ContentType: "image/png", Size: 2 << 20},
	} {
		if _, err := f.svc.Create(f.ctx, c); err == nil {
			t.Errorf("create %+v succeeded", c)
		}
	}
	rec, err := f.svc.Create(f.ctx, files.CreateFile{Tenant: f.tenant, Uploader: 1, Name: "a.txt", ContentType: "text/plain", Size: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Upload(f.ctx, f.tenant, 2, rec.ID, strings.NewReader("abc")); !errors.Is(err, files.ErrNotUploader) {
		t.Fatalf("upload by another user: %v", err)
	}
	if _, err := f.svc.Upload(f.ctx, f.tenant, 1, rec.ID, strings.NewReader("abcd")); err == nil {
		t.Fatal("a body longer than declared was stored")
	}
	got, err := f.svc.Get(f.ctx, f.tenant, rec.ID)
	if err != nil || got.Status != domain.FileStatusPending {
		t.Fatalf("after refused uploads: %+v, %v; want pending", got, err)
	}
	if _, _, err := f.svc.Open(f.ctx, f.tenant, rec.ID); !errors.Is(err, files.ErrNotUploaded) {
		t.Fatalf("open a pending file: %v", err)
	}
}

// gatedReader is an upload body that blocks on its first Read until open is closed, after
// telling started: it holds one upload between its checks and its write.
type gatedReader struct {
	body    io.Reader
	started chan struct{}
	open    chan struct{}
	once    sync.Once
}

func (g *gatedReader) Read(p []byte) (int, error) {
	g.once.Do(func() { close(g.started); <-g.open })
	return g.body.Read(p)
}

// storedDigest opens the file through the service and returns the SHA-256 of the bytes it serves.
func (f *fixture) storedDigest(t *testing.T, id string) ([]byte, string) {
	t.Helper()
	_, r, err := f.svc.Open(f.ctx, f.tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:])
}

// uploadedDigest returns the sha256 that file.uploaded.v1 recorded for the file.
func (f *fixture) uploadedDigest(t *testing.T, id string) string {
	t.Helper()
	envs, err := f.store.ReadAll(f.ctx, eventstore.Filter{Tenant: f.tenant}, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var sums []string
	for _, e := range envs {
		if e.StreamID == "file:"+id && e.EventType == domain.EventFileUploaded {
			var u domain.FileUploaded
			if err := e.Decode(&u); err != nil {
				t.Fatal(err)
			}
			sums = append(sums, u.SHA256)
		}
	}
	if len(sums) != 1 {
		t.Fatalf("file.uploaded.v1 events %v, want exactly one", sums)
	}
	return sums[0]
}

// Two uploads of one file that overlap: the one that completes first wins, and the one that
// was held between its checks and its write, released afterwards, loses with a conflict and
// leaves the winner's bytes in place. The bytes served are the bytes whose digest the event and
// the record hold.
func TestOverlappingUploadsServeTheRecordedBytes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rec, err := f.svc.Create(f.ctx, files.CreateFile{Tenant: f.tenant, Uploader: 42, Name: "c.bin", ContentType: "application/octet-stream", Size: 6})
	if err != nil {
		t.Fatal(err)
	}
	late := &gatedReader{body: strings.NewReader("late!!"), started: make(chan struct{}), open: make(chan struct{})}
	lateErr := make(chan error, 1)
	go func() {
		_, err := f.svc.Upload(f.ctx, f.tenant, 42, rec.ID, late)
		lateErr <- err
	}()
	<-late.started
	if _, err := f.svc.Upload(f.ctx, f.tenant, 42, rec.ID, strings.NewReader("first!")); err != nil {
		t.Fatalf("the first upload: %v", err)
	}
	close(late.open)
	if err := <-lateErr; !errors.Is(err, domain.ErrConcurrency) {
		t.Fatalf("the overlapping upload: %v, want a conflict (domain.ErrConcurrency)", err)
	}
	b, served := f.storedDigest(t, rec.ID)
	got, err := f.svc.Get(f.ctx, f.tenant, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if recorded := f.uploadedDigest(t, rec.ID); string(b) != "first!" || served != recorded || got.SHA256 != recorded {
		t.Fatalf("served %q (sha256 %s); file.uploaded.v1 says %s, the record %s; want the first upload's bytes under one digest",
			b, served, recorded, got.SHA256)
	}
}

// Eight uploads of one file at once: exactly one succeeds, the others are refused (a conflict,
// or already_uploaded once the winner completed), and the bytes served are those whose digest
// was recorded.
func TestConcurrentUploadsOneWins(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rec, err := f.svc.Create(f.ctx, files.CreateFile{Tenant: f.tenant, Uploader: 42, Name: "c.bin", ContentType: "application/octet-stream", Size: 6})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = f.svc.Upload(f.ctx, f.tenant, 42, rec.ID, strings.NewReader(fmt.Sprintf("conc%d!", i)))
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		var ve *domain.ValidationError
		switch {
		case err == nil:
			won++
		case errors.Is(err, domain.ErrConcurrency), errors.As(err, &ve) && ve.Reason == "already_uploaded":
		default:
			t.Errorf("upload %d: %v, want success, a conflict or already_uploaded", i, err)
		}
	}
	b, served := f.storedDigest(t, rec.ID)
	if recorded := f.uploadedDigest(t, rec.ID); won != 1 || served != recorded {
		t.Fatalf("%d uploads succeeded, want 1; served %q (sha256 %s), file.uploaded.v1 says %s", won, b, served, recorded)
	}
}

// objects lists the keys of the bucket's objects under prefix.
func (f *fixture) objects(t *testing.T, prefix string) []string {
	t.Helper()
	var keys []string
	it := f.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		obj, err := it.Next(f.ctx)
		if errors.Is(err, io.EOF) {
			return keys
		}
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, obj.Key)
	}
}

// TestLeftoverObjectsAreSwept: objects of a file's uploads that were never recorded (an upload a
// crash stopped after writing its object, a direct upload never completed) are deleted once the
// file's bytes are recorded, and every object of a file goes when the file is collected; another
// file's objects stay.
func TestLeftoverObjectsAreSwept(t *testing.T) {
	t.Parallel()
	f := setup(t)
	put := func(key, body string) {
		t.Helper()
		if err := f.bucket.WriteAll(f.ctx, key, []byte(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	rec, err := f.svc.Create(f.ctx, files.CreateFile{Tenant: f.tenant, Uploader: 42, Name: "a.txt", ContentType: "text/plain", Size: 5})
	if err != nil {
		t.Fatal(err)
	}
	base := rec.ObjectKey
	other := f.upload(t, 42, "b.txt", "text/plain", []byte("other"))
	put(base, "direct")                                        // a direct upload never completed
	put(base+".01a23b00-0000-7000-8000-000000000000", "crash") // an upload stopped by a crash
	if rec, err = f.svc.Upload(f.ctx, f.tenant, 42, rec.ID, strings.NewReader("hello")); err != nil {
		t.Fatal(err)
	}
	if got := f.objects(t, base); len(got) != 1 || got[0] != rec.ObjectKey {
		t.Fatalf("objects of the uploaded file %q, want only the recorded %q", got, rec.ObjectKey)
	}
	_, r, err := f.svc.Open(f.ctx, f.tenant, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(r)
	r.Close()
	if string(body) != "hello" {
		t.Fatalf("served %q, want the uploaded bytes", body)
	}

	put(rec.ObjectKey+".leftover", "late") // written after the sweep
	f.reference(t, "grp9", 1, 42, other.ID)
	f.advance(2 * time.Hour)
	if n, err := f.svc.Collect(f.ctx, f.tenant); err != nil || n != 1 {
		t.Fatalf("collect: %d, %v; want 1", n, err)
	}
	if got := f.objects(t, base); len(got) != 0 {
		t.Fatalf("objects of a collected file %q, want none", got)
	}
	if got := f.objects(t, other.ObjectKey); len(got) != 1 {
		t.Fatalf("objects of the referenced file %q, want its one", got)
	}
}

// staleRecords answers Unreferenced with a list read before a reference was projected.
type staleRecords struct {
	*filedb.Store
	stale []domain.FileRecord
}

func (s staleRecords) Unreferenced(context.Context, domain.TenantID, time.Time, int) ([]domain.FileRecord, error) {
	return s.stale, nil
}

// A file that a message came to reference while the collector deleted it is kept: the deletion
// is undone by file.restored.v1, the record is as it was and the bytes are served; applying the
// file's events again, as the projection does, changes nothing.
func TestCollectKeepsAFileReferencedMeanwhile(t *testing.T) {
	t.Parallel()
	f := setup(t)
	rec := f.upload(t, 42, "late.txt", "text/plain", []byte("referenced late"))
	stale, err := f.db.Get(f.ctx, f.tenant, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	f.reference(t, "grp4", 2, 42, rec.ID)
	svc, err := files.New(files.Deps{Bucket: f.bucket, Records: staleRecords{f.db, []domain.FileRecord{stale}}, Events: f.store,
		Queue: f.queue, Now: func() time.Time { return f.clock().Add(2 * time.Hour) }}, files.Config{GCGrace: time.Hour, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := svc.Collect(f.ctx, f.tenant); err != nil || n != 0 {
		t.Fatalf("collect: %d, %v; want nothing deleted", n, err)
	}
	want := []domain.EventType{domain.EventFileCreated, domain.EventFileUploaded, domain.EventFileDeleted, domain.EventFileRestored}
	if ev := f.events(t, rec.ID); fmt.Sprint(ev) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", ev, want)
	}
	got, err := f.db.Get(f.ctx, f.tenant, rec.ID)
	if err != nil || got.Status != domain.FileStatusUploaded || got.Version != 4 || got.RefCount != 1 {
		t.Fatalf("record after the restore: %+v %v", got, err)
	}
	_, r, err := f.svc.Open(f.ctx, f.tenant, rec.ID)
	if err != nil {
		t.Fatalf("open the file kept: %v", err)
	}
	r.Close()
	all, err := f.store.ReadAll(f.ctx, eventstore.Filter{Tenant: f.tenant}, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.db.Apply(f.ctx, f.tenant, all); err != nil || n != 0 {
		t.Fatalf("applying the events again changed %d records (%v)", n, err)
	}
	if again, _ := f.db.Get(f.ctx, f.tenant, rec.ID); again != got {
		t.Fatalf("record after the events were applied again: %+v, was %+v", again, got)
	}
}
