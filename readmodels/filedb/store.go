package filedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// File is the record of a file (domain.FileRecord).
type File = domain.FileRecord

// File statuses.
const (
	StatusPending  = domain.FileStatusPending
	StatusUploaded = domain.FileStatusUploaded
	StatusDeleted  = domain.FileStatusDeleted
)

// Store reads and writes the file tables of each tenant's database. Errors wrap
// domain.ErrRetryable when MySQL is unreachable; a missing file wraps domain.ErrNotFound.
type Store struct {
	router *tenantdb.Router
}

// New returns a Store over the tenant databases of router.
func New(router *tenantdb.Router) *Store { return &Store{router: router} }

const fileCols = "file_id, uploader_id, name, content_type, size, object_key, sha256, status, audit_status, audit_reason, ref_count, version, created_at, uploaded_at"

// Create inserts a new record (version 1, status pending).
func (s *Store) Create(ctx context.Context, tenant domain.TenantID, f File) error {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, "INSERT INTO im_files (file_id, uploader_id, name, content_type, size, object_key, status, audit_status, version, created_at)"+
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", f.ID, int64(f.Uploader), f.Name, f.ContentType, f.Size, f.ObjectKey,
		StatusPending, domain.FileAuditPending, f.Version, f.CreatedAt.UTC())
	return tenantdb.WrapErr("create file", err)
}

// Get reads a record.
func (s *Store) Get(ctx context.Context, tenant domain.TenantID, id string) (File, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return File{}, err
	}
	f, err := scan(db.QueryRowContext(ctx, "SELECT "+fileCols+" FROM im_files WHERE file_id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return File{}, fmt.Errorf("file %s: %w", id, domain.ErrNotFound)
	}
	return f, tenantdb.WrapErr("read file", err)
}

// GetMany reads the records of the files of ids that exist, by id, in one query.
func (s *Store) GetMany(ctx context.Context, tenant domain.TenantID, ids []string) (map[string]File, error) {
	out := make(map[string]File, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT "+fileCols+" FROM im_files WHERE file_id IN ("+placeholders(len(ids))+")", anys(ids)...)
	if err != nil {
		return nil, tenantdb.WrapErr("read files", err)
	}
	defer rows.Close()
	for rows.Next() {
		f, err := scan(rows)
		if err != nil {
			return nil, tenantdb.WrapErr("read files", err)
		}
		out[f.ID] = f
	}
	return out, tenantdb.WrapErr("read files", rows.Err())
}

func placeholders(n int) string { return "?" + strings.Repeat(", ?", n-1) }

func anys(ids []string) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

func scan(row interface{ Scan(...any) error }) (File, error) {
	var f File
	var uid int64
	var up sql.NullTime
	err := row.Scan(&f.ID, &uid, &f.Name, &f.ContentType, &f.Size, &f.ObjectKey, &f.SHA256, &f.Status, &f.Audit,
		&f.AuditReason, &f.RefCount, &f.Version, &f.CreatedAt, &up)
	f.Uploader, f.UploadedAt = domain.UserID(uid), up.Time
	return f, err
}

// update applies set to the record at version from, moving it to from+1; it reports whether
// the record was at that version.
func (s *Store) update(ctx context.Context, tenant domain.TenantID, id string, from int64, set string, args ...any) (bool, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return false, err
	}
	args = append(args, id, from)
	res, err := db.ExecContext(ctx, "UPDATE im_files SET "+set+", version = version + 1 WHERE file_id = ? AND version = ?", args...)
	if err != nil {
		return false, tenantdb.WrapErr("update file", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// MarkUploaded records the bytes' size, digest and object key (the object that holds them).
func (s *Store) MarkUploaded(ctx context.Context, tenant domain.TenantID, id string, from int64, size int64, sha, objectKey string, at time.Time) (bool, error) {
	return s.update(ctx, tenant, id, from, "status = ?, size = ?, sha256 = ?, object_key = ?, uploaded_at = ?", StatusUploaded, size, sha, objectKey, at.UTC())
}

// SetAudit records the security check's verdict.
func (s *Store) SetAudit(ctx context.Context, tenant domain.TenantID, id string, from int64, status, reason string, at time.Time) (bool, error) {
	return s.update(ctx, tenant, id, from, "audit_status = ?, audit_reason = ?, audited_at = ?", status, reason, at.UTC())
}

// MarkDeleted marks a record deleted unless it gained a reference meanwhile.
func (s *Store) MarkDeleted(ctx context.Context, tenant domain.TenantID, id string, from int64, at time.Time) (bool, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return false, err
	}
	res, err := db.ExecContext(ctx, "UPDATE im_files SET status = ?, deleted_at = ?, version = version + 1"+
		" WHERE file_id = ? AND version = ? AND ref_count = 0 AND NOT EXISTS (SELECT 1 FROM im_group_files r WHERE r.file_id = im_files.file_id)",
		StatusDeleted, at.UTC(), id, from)
	if err != nil {
		return false, tenantdb.WrapErr("delete file", err)
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// Unreferenced returns up to limit files created before cutoff that no message references and
// that are not deleted yet.
func (s *Store) Unreferenced(ctx context.Context, tenant domain.TenantID, cutoff time.Time, limit int) ([]File, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT "+fileCols+" FROM im_files WHERE status IN ('pending', 'uploaded') AND ref_count = 0"+
		" AND created_at < ? AND NOT EXISTS (SELECT 1 FROM im_group_files r WHERE r.file_id = im_files.file_id)"+
		" ORDER BY created_at LIMIT ?", cutoff.UTC(), limit)
	if err != nil {
		return nil, tenantdb.WrapErr("read unreferenced files", err)
	}
	defer rows.Close()
	var out []File
	for rows.Next() {
		f, err := scan(rows)
		if err != nil {
			return nil, tenantdb.WrapErr("read unreferenced files", err)
		}
		out = append(out, f)
	}
	return out, tenantdb.WrapErr("read unreferenced files", rows.Err())
}

// Topics returns the conversations whose messages reference the file.
func (s *Store) Topics(ctx context.Context, tenant domain.TenantID, id string) ([]string, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT DISTINCT source_topic FROM im_group_files WHERE file_id = ?", id)
	if err != nil {
		return nil, tenantdb.WrapErr("read file references", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, tenantdb.WrapErr("read file references", err)
		}
		out = append(out, t)
	}
	return out, tenantdb.WrapErr("read file references", rows.Err())
}

// TopicsOf returns, by file id, the conversations whose messages reference the files of ids,
// in one query.
func (s *Store) TopicsOf(ctx context.Context, tenant domain.TenantID, ids []string) (map[string][]string, error) {
	out := make(map[string][]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT DISTINCT file_id, source_topic FROM im_group_files WHERE file_id IN ("+placeholders(len(ids))+")", anys(ids)...)
	if err != nil {
		return nil, tenantdb.WrapErr("read file references", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, t string
		if err := rows.Scan(&id, &t); err != nil {
			return nil, tenantdb.WrapErr("read file references", err)
		}
		out[id] = append(out[id], t)
	}
	return out, tenantdb.WrapErr("read file references", rows.Err())
}

// ApplyRefs is the files-refs projection's applier: for every sent message whose head names
// files it inserts one reference per file (source_topic, source_seq), ignoring one it holds
// already, and recounts the files' references, in one transaction. It returns how many
// references were new.
func (s *Store) ApplyRefs(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	type ref struct {
		group int64
		file  string
		topic string
		seq   int64
		from  int64
		at    time.Time
	}
	var refs []ref
	for _, e := range events {
		if e.EventType != domain.EventGroupMessageSent && e.EventType != domain.EventDirectMessageSent {
			continue
		}
		var m domain.MessageSent
		if err := e.Decode(&m); err != nil {
			return 0, fmt.Errorf("decode %s %s: %w", e.EventType, e.EventID, err)
		}
		for _, f := range m.Head.Files {
			refs = append(refs, ref{group: m.GroupID, file: f, topic: m.Topic, seq: m.Seq, from: m.From.Int64(), at: m.SentAt})
		}
	}
	if len(refs) == 0 {
		return 0, nil
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return 0, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, tenantdb.WrapErr("begin file references", err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	args := make([]any, 0, 6*len(refs))
	files := map[string]bool{}
	for _, r := range refs {
		args = append(args, r.group, r.file, r.topic, r.seq, r.from, r.at.UTC())
		files[r.file] = true
	}
	res, err := tx.ExecContext(ctx, "INSERT IGNORE INTO im_group_files (group_id, file_id, source_topic, source_seq, created_by, created_at) VALUES "+
		strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?), ", len(refs)), ", "), args...)
	if err != nil {
		return 0, tenantdb.WrapErr("insert file references", err)
	}
	n, _ := res.RowsAffected()
	ids := make([]any, 0, len(files))
	for f := range files {
		ids = append(ids, f)
	}
	if _, err := tx.ExecContext(ctx, "UPDATE im_files SET ref_count = (SELECT COUNT(*) FROM im_group_files r WHERE r.file_id = im_files.file_id)"+
		" WHERE file_id IN (?"+strings.Repeat(", ?", len(ids)-1)+")", ids...); err != nil {
		return 0, tenantdb.WrapErr("count file references", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, tenantdb.WrapErr("commit file references", err)
	}
	return int(n), nil
}
