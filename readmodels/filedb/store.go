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

// Store reads and writes the file tables of each tenant's database: the read model the files-refs
// projection folds from the file events and the sent messages (ApplyBatch), which the file
// service also applies its events to right after appending them. Errors wrap
// domain.ErrRetryable when MySQL is unreachable; a missing file wraps domain.ErrNotFound.
type Store struct {
	router *tenantdb.Router
}

// New returns a Store over the tenant databases of router.
func New(router *tenantdb.Router) *Store { return &Store{router: router} }

const fileCols = "file_id, uploader_id, name, content_type, size, object_key, sha256, status, audit_status, audit_reason, ref_count, version, created_at, uploaded_at"

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

// Referenced reports whether a message references the file.
func (s *Store) Referenced(ctx context.Context, tenant domain.TenantID, id string) (bool, error) {
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return false, err
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM im_group_files WHERE file_id = ?", id).Scan(&n); err != nil {
		return false, tenantdb.WrapErr("read file references", err)
	}
	return n > 0, nil
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
