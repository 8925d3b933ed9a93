package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/imledger/imledger/domain"
)

// Records is the tenant's file records, the read model of the file events; *filedb.Store
// implements it. Apply writes the events the Service appended right after the append, so the
// next call reads what it did; the files-refs projection applies them again, and a record moves
// only from the version before an event to the event's, so the second write changes nothing.
type Records interface {
	Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error)
	Get(ctx context.Context, tenant domain.TenantID, id string) (domain.FileRecord, error)
	Unreferenced(ctx context.Context, tenant domain.TenantID, cutoff time.Time, limit int) ([]domain.FileRecord, error)
	// Referenced reports whether a message references the file.
	Referenced(ctx context.Context, tenant domain.TenantID, id string) (bool, error)
}

// EventStore appends events; *eventstore.Store implements it.
type EventStore interface {
	Append(ctx context.Context, tenant domain.TenantID, streamID string, expectedVersion int64, events []domain.Envelope) ([]domain.Envelope, error)
}

// CheckQueue puts a security-check task on im.file.security.
type CheckQueue interface {
	EnqueueCheck(ctx context.Context, t CheckTask) error
}

// Notifier tells a user about their file (the uploader of a rejected file gets an info frame).
type Notifier interface {
	FileRejected(ctx context.Context, tenant domain.TenantID, uploader domain.UserID, fileID, reason string)
}

// CheckTask is a record of im.file.security: which file to check, never its bytes.
type CheckTask struct {
	TenantID    domain.TenantID `json:"tenant_id"`
	FileID      string          `json:"file_id"`
	ObjectKey   string          `json:"object_key"`
	ContentType string          `json:"content_type"`
	Size        int64           `json:"size,string"`
}

// Deps are the collaborators of a Service.
type Deps struct {
	Bucket   *blob.Bucket // required
	Records  Records      // required
	Events   EventStore   // required
	Queue    CheckQueue   // required
	Checker  Checker      // default Rules from the config
	Notifier Notifier     // optional
	// Keys seals a new file's name under the uploader's data key (DESIGN §7a) and opens it for
	// the file records. Optional: names are stored as given.
	Keys interface {
		domain.Sealer
		domain.Opener
	}
	Logger *slog.Logger
	Now    func() time.Time
}

// Service runs the file life cycle. It is safe for concurrent use.
type Service struct {
	cfg  Config
	deps Deps
	log  *slog.Logger
}

// Errors of the file service, each with a stable reason.
var (
	// ErrNotUploaded: the file has no bytes yet.
	ErrNotUploaded = &domain.ValidationError{Field: "file", Reason: "not_uploaded", Detail: "the file's bytes are not uploaded yet"}
	// ErrRejected: the security check rejected the file; it is never served.
	ErrRejected = &domain.DeniedError{Reason: "file_rejected"}
	// ErrNotUploader: only the uploader may upload or complete a file.
	ErrNotUploader = &domain.DeniedError{Reason: "not_uploader"}
	// ErrUploadConflict: another upload or completion of the file was recorded first; this
	// one's bytes were discarded. It wraps domain.ErrConcurrency (409 conflict); asked again,
	// the upload answers already_uploaded.
	ErrUploadConflict = fmt.Errorf("files: another upload of the file was recorded first: %w", domain.ErrConcurrency)

	errAlreadyUploaded = &domain.ValidationError{Field: "file", Reason: "already_uploaded", Detail: "the file's bytes are stored already"}
)

// New validates its arguments.
func New(deps Deps, cfg Config) (*Service, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Bucket == nil || deps.Records == nil || deps.Events == nil || deps.Queue == nil {
		return nil, errors.New("files: a bucket, records, an event store and a check queue are required")
	}
	if deps.Checker == nil {
		deps.Checker = Rules{MaxBytes: cfg.MaxBytes, AllowedTypes: cfg.AllowedTypes}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	return &Service{cfg: cfg, deps: deps, log: deps.Logger}, nil
}

// Config returns the configuration with defaults applied.
func (s *Service) Config() Config { return s.cfg }

// CreateFile is the metadata of a file about to be uploaded.
type CreateFile struct {
	Tenant      domain.TenantID
	Uploader    domain.UserID
	Name        string
	ContentType string
	Size        int64
}

// MaxContentTypeBytes bounds a file's content type, as declared and as normalised.
const MaxContentTypeBytes = 128

// NormalizeContentType parses a declared content type with mime.ParseMediaType and returns it
// as mime.FormatMediaType writes it: type and parameter names in lower case, values quoted or
// encoded where they must be, so it is safe as a Content-Type header. ok is false for anything
// that is not type/subtype with well-formed parameters (CR, LF and other control characters
// included) or that is longer than MaxContentTypeBytes.
func NormalizeContentType(s string) (string, bool) {
	if len(s) > MaxContentTypeBytes {
		return "", false
	}
	t, params, err := mime.ParseMediaType(s)
	if err != nil || !strings.Contains(t, "/") {
		return "", false
	}
	out := mime.FormatMediaType(t, params)
	if out == "" || len(out) > MaxContentTypeBytes {
		return "", false
	}
	return out, true
}

func (c CreateFile) validate(max int64) error {
	var errs []error
	if c.Uploader <= 0 {
		errs = append(errs, &domain.ValidationError{Field: "uploader", Reason: "required"})
	}
	switch {
	case !utf8.ValidString(c.Name) || strings.ContainsFunc(c.Name, unicode.IsControl):
		errs = append(errs, &domain.ValidationError{Field: "name", Reason: "bad_text", Detail: "UTF-8 without control characters"})
	case c.Name == "" || len(c.Name) > 255 || strings.ContainsAny(c.Name, "/\\"):
		errs = append(errs, &domain.ValidationError{Field: "name", Reason: "bad_format", Detail: "1-255 bytes of UTF-8, no slashes"})
	}
	if _, ok := NormalizeContentType(c.ContentType); !ok {
		errs = append(errs, &domain.ValidationError{Field: "content_type", Reason: "bad_format", Detail: "a media type such as image/png"})
	}
	if c.Size <= 0 {
		errs = append(errs, &domain.ValidationError{Field: "size", Reason: "bad_value", Detail: "a positive number of bytes"})
	} else if c.Size > max {
		errs = append(errs, &domain.ValidationError{Field: "size", Reason: "too_large", Detail: "at most " + humanSize(max)})
	}
	return errors.Join(errs...)
}

// Create registers a file's metadata (file.created.v1) and returns its record, status pending.
func (s *Service) Create(ctx context.Context, c CreateFile) (domain.FileRecord, error) {
	if err := c.validate(s.cfg.MaxBytes); err != nil {
		return domain.FileRecord{}, err
	}
	c.ContentType, _ = NormalizeContentType(c.ContentType)
	id, err := uuid.NewV7()
	if err != nil {
		return domain.FileRecord{}, err
	}
	now := s.deps.Now().UTC().Truncate(time.Millisecond)
	f := domain.FileRecord{ID: id.String(), Uploader: c.Uploader, Name: c.Name, ContentType: c.ContentType, Size: c.Size,
		ObjectKey: objectKey(c.Tenant, id.String()), Status: domain.FileStatusPending, Audit: domain.FileAuditPending,
		Version: 1, CreatedAt: now}
	if err := s.append(ctx, c.Tenant, f.ID, 0, c.Uploader, domain.EventFileCreated, &domain.FileCreated{FileID: f.ID,
		Uploader: c.Uploader, Name: c.Name, ContentType: c.ContentType, Size: c.Size, ObjectKey: f.ObjectKey, CreatedAt: now}); err != nil {
		return domain.FileRecord{}, err
	}
	return f, nil
}

// errRecord marks a failure to write the record of an event that was appended: the event stands
// and the files-refs projection writes the record later.
var errRecord = errors.New("files: the record lags its event")

// append writes one event of a file's stream at version from+1, then applies it to the record.
// An error wrapping errRecord means the event was appended.
func (s *Service) append(ctx context.Context, tenant domain.TenantID, id string, from int64, actor domain.UserID, typ domain.EventType, payload any) error {
	fid, err := uuid.Parse(id)
	if err != nil {
		return err
	}
	a := domain.Actor{Type: domain.ActorSystem, ID: "files"}
	if actor > 0 {
		a = domain.Actor{Type: domain.ActorUser, ID: actor.String()}
	}
	keys := s.deps.Keys // nil: nothing is sealed or opened
	sealed, err := domain.SealPersonal(ctx, keys, tenant, []domain.PendingEvent{{Type: typ, Payload: payload}})
	if err != nil {
		return err
	}
	e, err := domain.NewEnvelope(tenant, domain.FileStreamID(fid), from+1, typ, a, sealed[0].Payload)
	if err != nil {
		return err
	}
	stored, err := s.deps.Events.Append(ctx, tenant, domain.FileStreamID(fid), from, []domain.Envelope{e})
	if err != nil {
		return err
	}
	if keys != nil {
		if err := domain.OpenEnvelopes(ctx, stored, keys); err != nil {
			return err
		}
	}
	if _, err := s.deps.Records.Apply(ctx, tenant, stored); err != nil {
		return fmt.Errorf("%w: %w", errRecord, err)
	}
	return nil
}

// Get returns a file's record.
func (s *Service) Get(ctx context.Context, tenant domain.TenantID, id string) (domain.FileRecord, error) {
	if _, err := uuid.Parse(id); err != nil {
		return domain.FileRecord{}, &domain.ValidationError{Field: "file_id", Reason: "bad_format", Detail: "a UUID"}
	}
	return s.deps.Records.Get(ctx, tenant, id)
}

// Upload stores the bytes of a pending file (exactly its declared size) and completes it.
//
// Each upload writes its own object (the file's object key with a suffix of its own), hashing
// the bytes as it writes them, and then appends file.uploaded.v1 naming that object at the
// stream version it read. Of uploads that overlap, the first to append wins; the others fail
// with ErrUploadConflict and delete their objects, so the object served is always the one whose
// digest was recorded, and no lock is held that a crash could leave behind. An upload that finds
// the file uploaded already fails with a *domain.ValidationError (already_uploaded).
func (s *Service) Upload(ctx context.Context, tenant domain.TenantID, uploader domain.UserID, id string, r io.Reader) (domain.FileRecord, error) {
	f, err := s.Get(ctx, tenant, id)
	if err != nil {
		return f, err
	}
	if f.Uploader != uploader {
		return f, ErrNotUploader
	}
	if f.Status != domain.FileStatusPending {
		return f, errAlreadyUploaded
	}
	attempt, err := uuid.NewV7()
	if err != nil {
		return f, err
	}
	key := f.ObjectKey + "." + attempt.String()
	w, err := s.deps.Bucket.NewWriter(ctx, key, &blob.WriterOptions{ContentType: f.ContentType})
	if err != nil {
		return f, domain.Retryable("open object", err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(r, f.Size+1))
	if err != nil {
		_ = w.Close()
		s.discard(ctx, tenant, id, key)
		return f, domain.Retryable("write object", err)
	}
	if n != f.Size {
		_ = w.Close()
		s.discard(ctx, tenant, id, key)
		return f, &domain.ValidationError{Field: "body", Reason: "size_mismatch", Detail: fmt.Sprintf("declared %d bytes, got %d or more", f.Size, n)}
	}
	if err := w.Close(); err != nil {
		s.discard(ctx, tenant, id, key)
		return f, domain.Retryable("store object", err)
	}
	out, appended, err := s.complete(ctx, tenant, uploader, f, key, hex.EncodeToString(h.Sum(nil)))
	if err != nil && !appended {
		s.discard(ctx, tenant, id, key)
	}
	return out, err
}

// discard deletes the object of an upload that did not become the file's bytes.
func (s *Service) discard(ctx context.Context, tenant domain.TenantID, id, key string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.deps.Bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		s.log.WarnContext(ctx, "files: delete the object of a failed upload", "tenant_id", tenant.String(), "file_id", id, "err", err)
	}
}

// sweep deletes the objects of file id other than keep: every upload writes an object of its
// own (the file's key, or the key with a suffix), and one that a crash stopped between writing
// it and recording it, or a direct upload that was never completed, would otherwise stay in the
// bucket for good. It runs once a file's bytes are recorded (keep: the recorded object) and when
// the file is collected (keep: none). Failures are logged; the next sweep of the file, if any,
// or an operator's listing of the bucket finds what is left.
func (s *Service) sweep(ctx context.Context, tenant domain.TenantID, id, keep string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	base := objectKey(tenant, id)
	it := s.deps.Bucket.List(&blob.ListOptions{Prefix: base})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			s.log.WarnContext(ctx, "files: list a file's objects", "tenant_id", tenant.String(), "file_id", id, "err", err)
			return
		}
		if obj.IsDir || obj.Key == keep || obj.Key != base && !strings.HasPrefix(obj.Key, base+".") {
			continue
		}
		if err := s.deps.Bucket.Delete(ctx, obj.Key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			s.log.WarnContext(ctx, "files: delete object", "tenant_id", tenant.String(), "file_id", id, "key", obj.Key, "err", err)
		}
	}
}

// objectKey is the object key of file id of tenant; each upload's object is this key with a
// suffix of its own.
func objectKey(tenant domain.TenantID, id string) string { return tenant.String() + "/" + id }

// Complete is the completion callback: the object must be in the bucket, at the file's object
// key, with the declared size. It records the upload (file.uploaded.v1) and queues the security
// check. Completing a file completed already answers its record; losing to a completion or
// upload that appended first fails with ErrUploadConflict.
func (s *Service) Complete(ctx context.Context, tenant domain.TenantID, uploader domain.UserID, id string) (domain.FileRecord, error) {
	f, err := s.Get(ctx, tenant, id)
	if err != nil {
		return f, err
	}
	if f.Uploader != uploader {
		return f, ErrNotUploader
	}
	if f.Status != domain.FileStatusPending {
		return f, nil
	}
	attrs, err := s.deps.Bucket.Attributes(ctx, f.ObjectKey)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return f, ErrNotUploaded
	}
	if err != nil {
		return f, domain.Retryable("read object", err)
	}
	if attrs.Size != f.Size {
		return f, &domain.ValidationError{Field: "file", Reason: "size_mismatch", Detail: "the stored object differs from the declared size"}
	}
	// The upload URL can write the object key again until it expires: the file's bytes are a
	// copy under a key nothing signs, made inside the store, so what was hashed and checked is
	// what is served.
	attempt, err := uuid.NewV7()
	if err != nil {
		return f, err
	}
	key := f.ObjectKey + "." + attempt.String()
	if err := s.deps.Bucket.Copy(ctx, key, f.ObjectKey, nil); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return f, ErrNotUploaded
		}
		return f, domain.Retryable("copy object", err)
	}
	sum, size, err := s.digest(ctx, key)
	if err == nil && size != f.Size {
		err = &domain.ValidationError{Field: "file", Reason: "size_mismatch", Detail: "the stored object differs from the declared size"}
	}
	if err != nil {
		s.discard(ctx, tenant, id, key)
		return f, err
	}
	out, appended, err := s.complete(ctx, tenant, uploader, f, key, sum)
	if err != nil && !appended {
		s.discard(ctx, tenant, id, key)
	}
	return out, err
}

// complete records that the object key holds f's bytes with digest sum: file.uploaded.v1 at the
// version f was read at, then the record, then the security check. appended reports whether the
// event was written, after which key is the file's object whatever else fails.
func (s *Service) complete(ctx context.Context, tenant domain.TenantID, uploader domain.UserID, f domain.FileRecord, key, sum string) (_ domain.FileRecord, appended bool, _ error) {
	now := s.deps.Now().UTC().Truncate(time.Millisecond)
	if err := s.append(ctx, tenant, f.ID, f.Version, uploader, domain.EventFileUploaded,
		domain.FileUploaded{FileID: f.ID, Size: f.Size, SHA256: sum, ObjectKey: key, UploadedAt: now}); err != nil {
		if errors.Is(err, domain.ErrConcurrency) {
			return f, false, ErrUploadConflict
		}
		return f, errors.Is(err, errRecord), err
	}
	f.Status, f.SHA256, f.ObjectKey, f.UploadedAt, f.Version = domain.FileStatusUploaded, sum, key, now, f.Version+1
	s.sweep(ctx, tenant, f.ID, key)
	if err := s.deps.Queue.EnqueueCheck(ctx, CheckTask{TenantID: tenant, FileID: f.ID, ObjectKey: key,
		ContentType: f.ContentType, Size: f.Size}); err != nil {
		// The file stays pending audit; the collector's sweep queues it again.
		s.log.WarnContext(ctx, "files: queue security check", "tenant_id", tenant.String(), "file_id", f.ID, "err", err)
	}
	return f, true, nil
}

// digest streams the object at key and returns its SHA-256 and size.
func (s *Service) digest(ctx context.Context, key string) (string, int64, error) {
	r, err := s.deps.Bucket.NewReader(ctx, key, nil)
	if err != nil {
		return "", 0, domain.Retryable("read object", err)
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, r)
	if err != nil {
		return "", 0, domain.Retryable("read object", err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// Check runs the security check of a task (file.audited.v1) and, for a rejection, tells the
// uploader. A file checked already, deleted, or unknown is skipped. An error means the check
// could not run and should be retried.
func (s *Service) Check(ctx context.Context, t CheckTask) error {
	f, err := s.deps.Records.Get(ctx, t.TenantID, t.FileID)
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if f.Status != domain.FileStatusUploaded || f.Audit != domain.FileAuditPending {
		return nil
	}
	head, err := s.head(ctx, f.ObjectKey)
	if err != nil {
		return err
	}
	v, err := s.deps.Checker.Check(ctx, CheckInput{Name: f.Name, ContentType: f.ContentType, Size: f.Size, Head: head})
	if err != nil {
		return err
	}
	status := domain.FileAuditApproved
	if !v.Approved {
		status = domain.FileAuditRejected
	}
	now := s.deps.Now().UTC().Truncate(time.Millisecond)
	if err := s.append(ctx, t.TenantID, f.ID, f.Version, 0, domain.EventFileAudited,
		domain.FileAudited{FileID: f.ID, Status: status, Reason: v.Reason, AuditedAt: now}); err != nil {
		if errors.Is(err, domain.ErrConcurrency) {
			return nil // another checker decided first
		}
		if !errors.Is(err, errRecord) {
			return err
		}
		s.log.WarnContext(ctx, "files: the record of a check lags its event", "tenant_id", t.TenantID.String(), "file_id", f.ID, "err", err)
	}
	if !v.Approved && s.deps.Notifier != nil {
		s.deps.Notifier.FileRejected(ctx, t.TenantID, f.Uploader, f.ID, v.Reason)
	}
	return nil
}

func (s *Service) head(ctx context.Context, key string) ([]byte, error) {
	r, err := s.deps.Bucket.NewRangeReader(ctx, key, 0, 512, nil)
	if err != nil {
		return nil, domain.Retryable("read object", err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, domain.Retryable("read object", err)
	}
	return b, nil
}

// Open returns a servable file's record and a reader of its bytes. A rejected file fails with
// ErrRejected, one without bytes with ErrNotUploaded, a collected one with domain.ErrNotFound.
func (s *Service) Open(ctx context.Context, tenant domain.TenantID, id string) (domain.FileRecord, io.ReadCloser, error) {
	f, err := s.Get(ctx, tenant, id)
	if err != nil {
		return f, nil, err
	}
	switch {
	case f.Audit == domain.FileAuditRejected:
		return f, nil, ErrRejected
	case f.Status == domain.FileStatusPending:
		return f, nil, ErrNotUploaded
	case f.Status == domain.FileStatusDeleted:
		return f, nil, fmt.Errorf("file %s: %w", id, domain.ErrNotFound)
	}
	r, err := s.deps.Bucket.NewReader(ctx, f.ObjectKey, nil)
	if err != nil {
		return f, nil, domain.Retryable("read object", err)
	}
	return f, r, nil
}

// Collect deletes the files of tenant that no message references and that are older than the
// grace period (file.deleted.v1, then the object), and returns how many it deleted. A file that
// gains a reference while it runs is kept: its deletion is undone (file.restored.v1) and its
// bytes stay.
func (s *Service) Collect(ctx context.Context, tenant domain.TenantID) (int, error) {
	now := s.deps.Now().UTC().Truncate(time.Millisecond)
	files, err := s.deps.Records.Unreferenced(ctx, tenant, now.Add(-s.cfg.GCGrace), 500)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range files {
		err := s.append(ctx, tenant, f.ID, f.Version, 0, domain.EventFileDeleted,
			domain.FileDeleted{FileID: f.ID, Reason: "unreferenced", DeletedAt: now})
		switch {
		case errors.Is(err, domain.ErrConcurrency):
			continue
		case errors.Is(err, errRecord): // deleted; the projection writes the record
			s.log.WarnContext(ctx, "files: the record of a deletion lags its event", "tenant_id", tenant.String(), "file_id", f.ID, "err", err)
		case err != nil:
			return n, err
		}
		referenced, err := s.deps.Records.Referenced(ctx, tenant, f.ID)
		if err != nil {
			return n, err // deleted, its bytes kept: the safe side
		}
		if referenced {
			// Referenced meanwhile: the deletion is undone, the record and bytes stay.
			err := s.append(ctx, tenant, f.ID, f.Version+1, 0, domain.EventFileRestored,
				domain.FileRestored{FileID: f.ID, Reason: "referenced", RestoredAt: now})
			if err != nil && !errors.Is(err, errRecord) {
				return n, err
			}
			continue
		}
		s.sweep(ctx, tenant, f.ID, "")
		n++
	}
	return n, nil
}

// MarshalTask encodes a check task as its record value.
func MarshalTask(t CheckTask) ([]byte, error) { return json.Marshal(t) }

// ParseTask decodes a record value of im.file.security.
func ParseTask(b []byte) (CheckTask, error) {
	var t CheckTask
	if err := json.Unmarshal(b, &t); err != nil {
		return t, err
	}
	if t.TenantID.IsZero() || t.FileID == "" {
		return t, errors.New("files: check task without tenant or file")
	}
	return t, nil
}
