package rest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/imledger/imledger/commands/files"
	"github.com/imledger/imledger/domain"
)

// FileService runs the file life cycle; *files.Service implements it.
type FileService interface {
	Create(ctx context.Context, c files.CreateFile) (domain.FileRecord, error)
	Upload(ctx context.Context, tenant domain.TenantID, uploader domain.UserID, id string, r io.Reader) (domain.FileRecord, error)
	Complete(ctx context.Context, tenant domain.TenantID, uploader domain.UserID, id string) (domain.FileRecord, error)
	Get(ctx context.Context, tenant domain.TenantID, id string) (domain.FileRecord, error)
	Open(ctx context.Context, tenant domain.TenantID, id string) (domain.FileRecord, io.ReadCloser, error)
	DirectUpload(ctx context.Context, f domain.FileRecord, caller domain.UserID) (files.SignedURL, bool, error)
	DirectDownload(ctx context.Context, f domain.FileRecord, disposition string) (files.SignedURL, bool, error)
}

var _ FileService = (*files.Service)(nil)

// FileReferences lists the conversations whose messages reference a file; *filedb.Store
// implements it.
type FileReferences interface {
	Topics(ctx context.Context, tenant domain.TenantID, id string) ([]string, error)
}

// FileURLSigner signs and checks the short-lived download URLs
// /v1/im/files/{id}/content?tenant=&expires=&sig= (HMAC-SHA256 of tenant, file and expiry).
type FileURLSigner struct {
	Key []byte
	TTL time.Duration
}

func (s FileURLSigner) mac(tenant, id string, exp int64) string {
	m := hmac.New(sha256.New, s.Key)
	m.Write([]byte(tenant + "\n" + id + "\n" + strconv.FormatInt(exp, 10)))
	return hex.EncodeToString(m.Sum(nil))
}

// Sign returns the download path of a file and when it expires.
func (s FileURLSigner) Sign(tenant domain.TenantID, id string, now time.Time) (string, time.Time) {
	exp := now.Add(s.TTL).Truncate(time.Second)
	q := url.Values{"tenant": {tenant.String()}, "expires": {strconv.FormatInt(exp.Unix(), 10)},
		"sig": {s.mac(tenant.String(), id, exp.Unix())}}
	return "/v1/im/files/" + id + "/content?" + q.Encode(), exp
}

// Verify checks a download URL's query at now.
func (s FileURLSigner) Verify(tenant, id, expires, sig string, now time.Time) bool {
	exp, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || now.Unix() > exp || len(s.Key) == 0 {
		return false
	}
	return hmac.Equal([]byte(sig), []byte(s.mac(tenant, id, exp)))
}

// File is the data of a file answer.
type File struct {
	FileID      string `json:"file_id" format:"uuid"`
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Size        string `json:"size" doc:"Bytes (64-bit, as a string)"`
	Status      string `json:"status" enum:"pending,uploaded,deleted"`
	Audit       string `json:"audit" enum:"pending,approved,rejected"`
	AuditReason string `json:"audit_reason,omitempty"`
	UploadURL   string `json:"upload_url,omitempty" doc:"PUT the bytes here (with the bearer token) while the file is pending"`
	// DirectUpload is set for the uploader of a pending file when object storage takes uploads
	// directly.
	DirectUpload *DirectUpload `json:"direct_upload,omitempty" doc:"Present for the uploader of a pending file when object storage takes uploads directly (S3 and S3-compatible stores): PUT exactly size bytes to url, with no token, before expires_at, then POST /v1/im/files/{id}/complete. Absent: PUT the bytes to upload_url."`
	CreatedAt    string        `json:"created_at"`
}

// DirectUpload is a signed URL of object storage that takes a pending file's bytes.
type DirectUpload struct {
	URL       string `json:"url" doc:"Signed object-storage URL; send no Authorization header"`
	Method    string `json:"method" enum:"PUT"`
	ExpiresAt string `json:"expires_at"`
}

func fileData(f domain.FileRecord) File {
	out := File{FileID: f.ID, Name: f.Name, ContentType: f.ContentType, Size: strconv.FormatInt(f.Size, 10), Status: f.Status,
		Audit: f.Audit, AuditReason: f.AuditReason, CreatedAt: rfc3339(f.CreatedAt)}
	if f.Status == domain.FileStatusPending {
		out.UploadURL = "/v1/im/files/" + f.ID + "/content"
	}
	return out
}

// fileAnswer is f as its reader p sees it: with a direct upload URL for the uploader of a
// pending file when the bucket signs them.
func (a *API) fileAnswer(ctx context.Context, p Principal, f domain.FileRecord) (File, error) {
	out := fileData(f)
	u, ok, err := a.h.Files.DirectUpload(ctx, f, p.User)
	if err != nil {
		return out, a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	if ok {
		out.DirectUpload = &DirectUpload{URL: u.URL, Method: u.Method, ExpiresAt: rfc3339(u.ExpiresAt)}
	}
	return out, nil
}

// FileURL is the data of a download URL answer.
type FileURL struct {
	URL       string `json:"url" doc:"The download, valid until expires_at without a token: a path of this API, or a signed object-storage URL when the bucket signs them"`
	ExpiresAt string `json:"expires_at"`
}

type fileCreateInput struct {
	IdempotencyHeader
	Body struct {
		Name        string `json:"name" maxLength:"255"`
		ContentType string `json:"content_type" maxLength:"128" example:"image/png"`
		Size        string `json:"size" doc:"Bytes (64-bit, as a string)" example:"5120"`
	}
}

type fileInput struct {
	ID string `path:"id" doc:"File id (UUID)"`
}

type fileWrite struct {
	IdempotencyHeader
	ID string `path:"id" doc:"File id (UUID)"`
}

// fileUploadInput takes the body as a reader rather than huma's RawBody, which would copy it
// once more: the idempotency middleware holds the upload in memory already (within
// Config.UploadMemory), and the handler streams it from there to the bucket.
type fileUploadInput struct {
	IdempotencyHeader
	ID   string `path:"id" doc:"File id (UUID)"`
	body io.Reader
}

// Resolve implements huma.Resolver: it keeps the request's body reader.
func (in *fileUploadInput) Resolve(ctx huma.Context) []error {
	in.body = ctx.BodyReader()
	return nil
}

// registerFiles registers the upload and the reads of files.
func (a *API) registerFiles() {
	huma.Register(a.huma, a.build(op{id: "create-file", method: http.MethodPost, path: "/v1/im/files", status: http.StatusCreated,
		summary: "Register a file's metadata before its bytes", tag: "files",
		desc: "Then PUT the bytes to upload_url, or, when the answer has direct_upload, straight to object storage and POST /v1/im/files/{id}/complete. A message references files with head.files; a file no message references is collected after files.gc_grace."}),
		a.createFile)
	up := a.build(op{id: "upload-file", method: http.MethodPut, path: "/v1/im/files/{id}/content",
		summary: "Upload a file's bytes", tag: "files",
		errs: []int{http.StatusForbidden, http.StatusNotFound, http.StatusTooManyRequests, http.StatusRequestTimeout},
		desc: "Exactly the declared size, at most files.max_bytes; the uploader only. Completes the file and queues its security check. " +
			"Of uploads of one file that overlap, one is recorded and the others are 409 conflict. Upload bodies are held in the " +
			"node's memory while they arrive: 503 retry while the node holds its limit of them, 429 rate_limited (limit " +
			"upload_memory_user or upload_memory_tenant) while the caller, or the caller's tenant, holds its share; 408 " +
			"request_timeout when the body stops arriving for files.upload_idle_timeout."})
	// The idempotency middleware enforces this limit (huma reads no body for this input).
	up.MaxBodyBytes = a.cfg.MaxFileBytes
	up.RequestBody = &huma.RequestBody{Required: true, Description: "The file's bytes, exactly its declared size, at most files.max_bytes",
		Content: map[string]*huma.MediaType{"application/octet-stream": {Schema: &huma.Schema{Type: huma.TypeString, Format: "binary"}}}}
	huma.Register(a.huma, up, a.uploadFile)
	huma.Register(a.huma, a.build(op{id: "complete-file", method: http.MethodPost, path: "/v1/im/files/{id}/complete",
		summary: "Completion callback after a direct upload to object storage", tag: "files", errs: []int{http.StatusForbidden, http.StatusNotFound},
		desc: "The uploader, after PUTting the bytes to direct_upload.url. The object must hold exactly the declared size (400 size_mismatch); " +
			"it is copied inside the store to a key no URL writes, hashed, recorded (file.uploaded.v1) and queued for the security check. " +
			"400 not_uploaded when the store has no object yet; completing a completed file answers its record."}),
		a.completeFile)
	huma.Register(a.huma, a.build(op{id: "get-file", method: http.MethodGet, path: "/v1/im/files/{id}",
		summary: "Read a file's record", tag: "files", errs: []int{http.StatusForbidden, http.StatusNotFound}}),
		a.getFile)
	huma.Register(a.huma, a.build(op{id: "file-url", method: http.MethodGet, path: "/v1/im/files/{id}/url",
		summary: "A short-lived download URL", tag: "files", errs: []int{http.StatusForbidden, http.StatusNotFound},
		desc: "The uploader and the members of a conversation whose messages reference the file. 403 file_rejected once the security check rejected it."}),
		a.fileURL)
}

// createFile records the metadata of a file the caller is about to upload.
func (a *API) createFile(ctx context.Context, in *fileCreateInput) (*reply[File], error) {
	p := principal(ctx)
	size, err := strconv.ParseInt(in.Body.Size, 10, 64)
	if err != nil {
		return nil, a.fail(ctx, &domain.ValidationError{Field: "size", Reason: "bad_format", Detail: "a decimal number of bytes"})
	}
	f, err := a.h.Files.Create(ctx, files.CreateFile{Tenant: p.Tenant, Uploader: p.User, Name: in.Body.Name, ContentType: in.Body.ContentType, Size: size})
	if err != nil {
		return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	out, err := a.fileAnswer(ctx, p, f)
	if err != nil {
		return nil, err
	}
	return respond(ctx, http.StatusCreated, out), nil
}

// uploadFile streams the bytes of the caller's file to the bucket.
func (a *API) uploadFile(ctx context.Context, in *fileUploadInput) (*reply[File], error) {
	p := principal(ctx)
	f, err := a.h.Files.Upload(ctx, p.Tenant, p.User, in.ID, io.LimitReader(in.body, a.cfg.MaxFileBytes+1))
	if err != nil {
		return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	return respond(ctx, http.StatusOK, fileData(f)), nil
}

// completeFile completes a file the caller uploaded straight to object storage.
func (a *API) completeFile(ctx context.Context, in *fileWrite) (*reply[File], error) {
	p := principal(ctx)
	f, err := a.h.Files.Complete(ctx, p.Tenant, p.User, in.ID)
	if err != nil {
		return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	return respond(ctx, http.StatusOK, fileData(f)), nil
}

// getFile reads the record of a file the caller may see.
func (a *API) getFile(ctx context.Context, in *fileInput) (*reply[File], error) {
	p := principal(ctx)
	f, err := a.readableFile(ctx, p, in.ID)
	if err != nil {
		return nil, err
	}
	out, err := a.fileAnswer(ctx, p, f)
	if err != nil {
		return nil, err
	}
	return respond(ctx, http.StatusOK, out), nil
}

// fileURL answers a short-lived download URL of a file the caller may see: the store's own when
// it signs one, else one of this API's.
func (a *API) fileURL(ctx context.Context, in *fileInput) (*reply[FileURL], error) {
	p := principal(ctx)
	f, err := a.readableFile(ctx, p, in.ID)
	if err != nil {
		return nil, err
	}
	if f.Audit == domain.FileAuditRejected {
		return nil, a.fail(ctx, files.ErrRejected)
	}
	if f.Status != domain.FileStatusUploaded {
		return nil, a.fail(ctx, files.ErrNotUploaded)
	}
	direct, ok, err := a.h.Files.DirectDownload(ctx, f, attachment(f.Name))
	if err != nil {
		return nil, a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	if ok {
		return respond(ctx, http.StatusOK, FileURL{URL: direct.URL, ExpiresAt: rfc3339(direct.ExpiresAt)}), nil
	}
	u, exp := a.h.FileURLs.Sign(p.Tenant, f.ID, time.Now())
	return respond(ctx, http.StatusOK, FileURL{URL: u, ExpiresAt: rfc3339(exp)}), nil
}

// readableFile reads a file the caller may see: theirs, or referenced in a conversation they
// may read.
func (a *API) readableFile(ctx context.Context, p Principal, id string) (domain.FileRecord, error) {
	f, err := a.h.Files.Get(ctx, p.Tenant, id)
	if err != nil {
		return f, a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	if f.Uploader == p.User {
		return f, nil
	}
	topics, err := a.h.FileRefs.Topics(ctx, p.Tenant, id)
	if err != nil {
		return f, a.fail(ctx, err, "tenant_id", p.Tenant.String())
	}
	for _, t := range topics {
		topic, err := domain.ParseTopic(t)
		if err == nil && a.h.ReadPolicy.CanRead(ctx, p.Tenant, p.User, topic) == nil {
			return f, nil
		}
	}
	return f, a.fail(ctx, &domain.DeniedError{Reason: "not_shared"})
}

// FileDownload serves GET /v1/im/files/{id}/content with a signed query and no token: the bytes
// of an uploaded file that was not rejected, with its content type. Its errors are the JSON
// envelope: a bad or expired signature is 403 signature_invalid, a rejected file 403
// file_rejected, an unknown or collected one 404 not_found, a store that fails 503 retry. A URL
// signed before its tenant was suspended (or removed) is refused as every request of the tenant
// is: tenants (the Gate; nil checks nothing) answers 403 tenant_suspended or tenant_not_found.
// The API's OpenAPI document describes it (operation download-file) when the file endpoints are
// on.
func FileDownload(fs FileService, signer FileURLSigner, tenants TenantChecker) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, q := r.PathValue("id"), r.URL.Query()
		rid := r.Header.Get(HeaderRequestID)
		if !requestIDRe.MatchString(rid) {
			rid = newRequestID()
		}
		if !signer.Verify(q.Get("tenant"), id, q.Get("expires"), q.Get("sig"), time.Now()) {
			writeHTTPError(w, r, newError(rid, http.StatusForbidden, ReasonSignatureInvalid,
				"the download URL's signature is bad or expired; ask for a new URL", nil))
			return
		}
		tenant, err := domain.NewTenantID(q.Get("tenant"))
		if err != nil {
			writeHTTPError(w, r, newError(rid, http.StatusBadRequest, ReasonInvalid, "invalid tenant",
				map[string]any{"field": "tenant", "reason": "bad_format"}))
			return
		}
		if tenants != nil {
			if err := tenants.CheckTenant(r.Context(), tenant); err != nil {
				writeHTTPError(w, r, mapError(rid, err))
				return
			}
		}
		f, rc, err := fs.Open(r.Context(), tenant, id)
		switch {
		case errors.Is(err, files.ErrRejected), errors.Is(err, domain.ErrNotFound):
			writeHTTPError(w, r, mapError(rid, err))
			return
		case err != nil:
			e := newError(rid, http.StatusServiceUnavailable, ReasonRetry, "the file store is unavailable, retry",
				map[string]any{"retryable": true})
			e.headers.Set("Retry-After", "1")
			writeHTTPError(w, r, e)
			return
		}
		defer rc.Close()
		w.Header().Set(HeaderRequestID, rid)
		w.Header().Set("Content-Type", downloadType(f.ContentType))
		w.Header().Set("Content-Length", strconv.FormatInt(f.Size, 10))
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Disposition", attachment(f.Name))
		_, _ = io.Copy(w, rc)
	})
}

// TenantChecker refuses a tenant that does not exist or is suspended (Gate.CheckTenant).
type TenantChecker interface {
	CheckTenant(ctx context.Context, tenant domain.TenantID) error
}

// DownloadPath is the route of FileDownload, which the caller mounts on the mux beside the API.
const DownloadPath = "/v1/im/files/{id}/content"

// documentDownload adds FileDownload to the OpenAPI document by hand: it is a plain handler
// (it streams the bytes, with no token), so huma does not know it, and the error responses
// operationReasons derives (401, Idempotency-Key) are not its own.
func (a *API) documentDownload() {
	doc := a.huma.OpenAPI()
	item := doc.Paths[DownloadPath]
	if item == nil {
		item = &huma.PathItem{}
	}
	var errContent map[string]*huma.MediaType
	if item.Put != nil && item.Put.Responses["400"] != nil {
		errContent = item.Put.Responses["400"].Content
	}
	query := func(name, doc string) *huma.Param {
		return &huma.Param{Name: name, In: "query", Required: true, Description: doc, Schema: &huma.Schema{Type: huma.TypeString}}
	}
	resp := func(status int, reasons ...string) *huma.Response {
		return &huma.Response{Description: reasonsDescription(status, reasons), Content: errContent,
			Extensions: map[string]any{ExtReasons: reasons}}
	}
	item.Get = &huma.Operation{
		OperationID: "download-file", Method: http.MethodGet, Path: DownloadPath, Tags: []string{"files"},
		Summary: "Download a file's bytes from a signed URL",
		Description: "The path GET /v1/im/files/{id}/url answers, valid for files.url_ttl; no token. The bytes come with the " +
			"file's normalised content type and Content-Disposition: attachment naming the file. Errors are the envelope.",
		Security: []map[string][]string{},
		Parameters: []*huma.Param{
			{Name: "id", In: "path", Required: true, Description: "File id (UUID)", Schema: &huma.Schema{Type: huma.TypeString, Format: "uuid"}},
			query("tenant", "The file's tenant"),
			query("expires", "Unix time the URL expires at"),
			query("sig", "HMAC-SHA256 signature of tenant, file and expiry"),
		},
		Responses: map[string]*huma.Response{
			"200": {Description: "The file's bytes",
				Content: map[string]*huma.MediaType{"application/octet-stream": {Schema: &huma.Schema{Type: huma.TypeString, Format: "binary"}}},
				Headers: map[string]*huma.Param{
					"Content-Disposition": {Description: "attachment with the file's name", Schema: &huma.Schema{Type: huma.TypeString}},
				}},
			"400": resp(http.StatusBadRequest, ReasonInvalid),
			"403": resp(http.StatusForbidden, ReasonSignatureInvalid, files.ErrRejected.Reason, domain.ReasonTenantNotFound,
				domain.ReasonTenantSuspended),
			"404": resp(http.StatusNotFound, ReasonNotFound),
			"503": resp(http.StatusServiceUnavailable, ReasonRetry),
		},
	}
	item.Get.Responses["503"].Headers = header("Retry-After", "Seconds to wait before trying again")
	doc.Paths[DownloadPath] = item
}

// writeHTTPError answers a plain net/http handler's request with e in the envelope, as huma's
// handlers answer.
func writeHTTPError(w http.ResponseWriter, r *http.Request, e *Error) {
	h := w.Header()
	for k, vs := range e.headers {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	h.Set("Content-Type", "application/json")
	h.Set(HeaderRequestID, e.RequestID)
	w.WriteHeader(e.status)
	if r.Method != http.MethodHead {
		_ = huma.DefaultJSONFormat.Marshal(w, e)
	}
}

// downloadType is the Content-Type a file is served with: its content type as
// files.NormalizeContentType writes it, application/octet-stream when the stored one does not
// parse (a record from before creation normalised it), so no stored text reaches the header as it is.
func downloadType(stored string) string {
	if ct, ok := files.NormalizeContentType(stored); ok {
		return ct
	}
	return "application/octet-stream"
}

// attachment is the Content-Disposition of a download named name: mime.FormatMediaType quotes
// the name, or writes it as an RFC 2231 filename* parameter (UTF-8, percent-encoded) when it
// holds bytes outside printable ASCII, so no name can end the parameter or the header; a name
// it cannot write is left out.
func attachment(name string) string {
	if cd := mime.FormatMediaType("attachment", map[string]string{"filename": name}); cd != "" {
		return cd
	}
	return "attachment"
}
