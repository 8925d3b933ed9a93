package filedb

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/eventdecode"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Tables names the tables of the files-refs read model. The projection, the file service and the
// queries use DefaultTables; a rebuild writes DefaultTables().WithSuffix("_rebuild") and then
// SwapTables.
type Tables struct {
	Files string // im_files
	Refs  string // im_group_files
}

// DefaultTables returns the live table names created by the migrations.
func DefaultTables() Tables { return Tables{Files: "im_files", Refs: "im_group_files"} }

// WithSuffix returns t with s appended to every name, e.g. "_rebuild".
func (t Tables) WithSuffix(s string) Tables { return Tables{Files: t.Files + s, Refs: t.Refs + s} }

const pkgName = "filedb"

func (t Tables) list() []string { return []string{t.Files, t.Refs} }

// Validate checks that every name is 1 to 60 characters of [A-Za-z0-9_] and that they differ.
func (t Tables) Validate() error { return tableset.Validate(pkgName, t.list()) }

// CreateTablesLike creates each table of to like the matching table of from, without rows.
func CreateTablesLike(ctx context.Context, db *sql.DB, from, to Tables) error {
	return tableset.CreateLike(ctx, db, pkgName, from.list(), to.list())
}

// SwapTables puts the rebuilt tables in place of the live ones with one RENAME TABLE and drops the
// old ones (tableset.Swap).
func SwapTables(ctx context.Context, db *sql.DB, live, rebuilt Tables) error {
	return tableset.Swap(ctx, db, pkgName, live.list(), rebuilt.list())
}

// DropTables drops every table of t that exists.
func DropTables(ctx context.Context, db *sql.DB, t Tables) error {
	return tableset.Drop(ctx, db, pkgName, t.list())
}

// EventError says which event of a batch could not be applied; Err wraps domain.ErrInvalid for
// an event that can never be applied.
type EventError = readmodels.EventError

// fileOp is one decoded event: a statement on the files table, or the references of a sent
// message. Neither: an event this read model ignores.
type fileOp struct {
	stmt string
	args []any
	refs []fileRef
}

type fileRef struct {
	group int64
	file  string
	topic string
	seq   int64
	from  int64
	at    time.Time
}

// Statements of the files table. A record changes only for the event that follows the one that
// wrote it (version = v-1), so applying an event again changes nothing and the file service's
// write right after an append and the projection's write are the same write. A new record counts
// the references already there, since a message may be projected before its file's creation.
const (
	createStmt = "INSERT INTO %[1]s (file_id, uploader_id, name, content_type, size, object_key, status, audit_status, ref_count, version, created_at)" +
		" SELECT ?, ?, ?, ?, ?, ?, 'pending', 'pending', (SELECT COUNT(*) FROM %[2]s r WHERE r.file_id = ?), 1, ?" +
		" ON DUPLICATE KEY UPDATE version = version"
	uploadStmt  = "UPDATE %s SET status = 'uploaded', size = ?, sha256 = ?, object_key = IF(? = '', object_key, ?), uploaded_at = ?, version = ? WHERE file_id = ? AND version = ?"
	auditStmt   = "UPDATE %s SET audit_status = ?, audit_reason = ?, audited_at = ?, version = ? WHERE file_id = ? AND version = ?"
	deleteStmt  = "UPDATE %s SET status = 'deleted', deleted_at = ?, version = ? WHERE file_id = ? AND version = ?"
	restoreStmt = "UPDATE %s SET status = IF(uploaded_at IS NULL, 'pending', 'uploaded'), deleted_at = NULL, version = ? WHERE file_id = ? AND version = ?"
)

// decodeOne decodes a file event or a sent message of a batch.
func decodeOne(tables Tables) func(int, domain.Envelope) (fileOp, error) {
	files, refs := tableset.Quote(tables.Files), tableset.Quote(tables.Refs)
	return func(_ int, env domain.Envelope) (fileOp, error) {
		v := env.StreamVersion
		op := func(stmt string, args ...any) fileOp { return fileOp{stmt: fmt.Sprintf(stmt, files), args: args} }
		switch env.EventType {
		case domain.EventGroupMessageSent, domain.EventDirectMessageSent:
			return decodeRefs(env)
		case domain.EventFileCreated:
			var p domain.FileCreated
			if err := decodeFile(env, &p, func() string { return p.FileID }); err != nil {
				return fileOp{}, err
			}
			return fileOp{stmt: fmt.Sprintf(createStmt, files, refs), args: []any{p.FileID, p.Uploader.Int64(), p.Name, p.ContentType, p.Size,
				p.ObjectKey, p.FileID, readmodels.Millis(p.CreatedAt)}}, nil
		case domain.EventFileUploaded:
			var p domain.FileUploaded
			if err := decodeFile(env, &p, func() string { return p.FileID }); err != nil {
				return fileOp{}, err
			}
			return op(uploadStmt, p.Size, p.SHA256, p.ObjectKey, p.ObjectKey, readmodels.Millis(p.UploadedAt), v, p.FileID, v-1), nil
		case domain.EventFileAudited:
			var p domain.FileAudited
			if err := decodeFile(env, &p, func() string { return p.FileID }); err != nil {
				return fileOp{}, err
			}
			return op(auditStmt, p.Status, readmodels.FitChars(p.Reason, 128), readmodels.Millis(p.AuditedAt), v, p.FileID, v-1), nil
		case domain.EventFileDeleted:
			var p domain.FileDeleted
			if err := decodeFile(env, &p, func() string { return p.FileID }); err != nil {
				return fileOp{}, err
			}
			return op(deleteStmt, readmodels.Millis(p.DeletedAt), v, p.FileID, v-1), nil
		case domain.EventFileRestored:
			var p domain.FileRestored
			if err := decodeFile(env, &p, func() string { return p.FileID }); err != nil {
				return fileOp{}, err
			}
			return op(restoreStmt, v, p.FileID, v-1), nil
		}
		return fileOp{}, nil
	}
}

// decodeFile decodes a file event into p and checks that it is on the stream of the file whose
// id, called after decoding, id returns.
func decodeFile(env domain.Envelope, p any, id func() string) error {
	if err := env.Decode(p); err != nil {
		return eventdecode.Bad("payload", err.Error())
	}
	fid, err := uuid.Parse(id())
	if err != nil || fid.String() != id() {
		return eventdecode.Bad("file_id", "a UUID")
	}
	if want := domain.FileStreamID(fid); env.StreamID != want {
		return eventdecode.Bad("stream_id", fmt.Sprintf("%s names stream %q, the payload belongs to %q", env.EventType, env.StreamID, want))
	}
	return nil
}

// decodeRefs returns the references of a sent message's head.files.
func decodeRefs(env domain.Envelope) (fileOp, error) {
	var m domain.MessageSent
	if err := env.Decode(&m); err != nil {
		return fileOp{}, eventdecode.Bad("payload", err.Error())
	}
	var o fileOp
	for _, f := range m.Head.Files {
		o.refs = append(o.refs, fileRef{group: m.GroupID, file: f, topic: m.Topic, seq: m.Seq, from: m.From.Int64(), at: readmodels.Millis(m.SentAt)})
	}
	return o, nil
}

// ApplyBatch folds one tenant's file events and sent messages into tables in one transaction and
// returns how many changed something: a file event writes its record (version-guarded), a sent
// message whose head names files inserts one reference per file (source_topic, source_seq; one
// it holds already is ignored) and recounts those files' references. Other event types are
// ignored.
//
// Errors: an *EventError wrapping domain.ErrInvalid for an event that can never be applied;
// domain.ErrNotFound (wrapped) for a tenant without a database; domain.ErrRetryable when MySQL is
// unreachable.
func (s *Store) ApplyBatch(ctx context.Context, tenant domain.TenantID, tables Tables, events []domain.Envelope) (n int, err error) {
	if err := tables.Validate(); err != nil {
		return 0, err
	}
	ops, err := eventdecode.Batch(tenant, events, decodeOne(tables), func(i int, id uuid.UUID, err error) error {
		return &EventError{Index: i, EventID: id, Err: err}
	})
	if err != nil {
		return 0, fmt.Errorf("filedb: apply: %w", err)
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return 0, fmt.Errorf("filedb: apply: %w", err)
	}
	if len(ops) == 1 && ops[0].stmt != "" {
		// One record change, as the file service writes after each event: one statement, one
		// round trip, as the record write before the read model was rebuildable.
		res, err := db.ExecContext(ctx, ops[0].stmt, ops[0].args...)
		if err != nil {
			return 0, tenantdb.WrapErr("filedb: apply", err)
		}
		if k, _ := res.RowsAffected(); k > 0 {
			return 1, nil
		}
		return 0, nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, tenantdb.WrapErr("filedb: apply: begin", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	for _, o := range ops {
		var k int
		if o.stmt != "" {
			k, err = exec(ctx, tx, o.stmt, o.args...)
		} else if len(o.refs) > 0 {
			k, err = insertRefs(ctx, tx, tables, o.refs)
		}
		if err != nil {
			return 0, err
		}
		n += k
	}
	if err := tx.Commit(); err != nil {
		return 0, tenantdb.WrapErr("filedb: apply: commit", err)
	}
	return n, nil
}

// Apply is ApplyBatch to the live tables.
func (s *Store) Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	return s.ApplyBatch(ctx, tenant, DefaultTables(), events)
}

func exec(ctx context.Context, tx *sql.Tx, stmt string, args ...any) (int, error) {
	res, err := tx.ExecContext(ctx, stmt, args...)
	if err != nil {
		return 0, tenantdb.WrapErr("filedb: apply", err)
	}
	if k, _ := res.RowsAffected(); k > 0 {
		return 1, nil
	}
	return 0, nil
}

// insertRefs inserts one message's references and recounts its files' references.
func insertRefs(ctx context.Context, tx *sql.Tx, tables Tables, refs []fileRef) (int, error) {
	args := make([]any, 0, 6*len(refs))
	ids := make([]any, 0, len(refs))
	for _, r := range refs {
		args = append(args, r.group, r.file, r.topic, r.seq, r.from, r.at)
		ids = append(ids, r.file)
	}
	res, err := tx.ExecContext(ctx, "INSERT IGNORE INTO "+tableset.Quote(tables.Refs)+" (group_id, file_id, source_topic, source_seq, created_by, created_at) VALUES "+
		tableset.RowPlaceholders(len(refs), 6), args...)
	if err != nil {
		return 0, tenantdb.WrapErr("insert file references", err)
	}
	n, _ := res.RowsAffected()
	if n == 0 {
		return 0, nil
	}
	files, r := tableset.Quote(tables.Files), tableset.Quote(tables.Refs)
	if _, err := tx.ExecContext(ctx, "UPDATE "+files+" SET ref_count = (SELECT COUNT(*) FROM "+r+" r WHERE r.file_id = "+files+".file_id)"+
		" WHERE file_id IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ")+")", ids...); err != nil {
		return 0, tenantdb.WrapErr("count file references", err)
	}
	return int(n), nil
}

// Summary summarises the files-refs read model of one tenant, table by table.
type Summary struct {
	Files readmodels.TableSummary
	Refs  readmodels.TableSummary
}

// Checksum summarises tables so two copies (the live tables and a rebuild) can be compared. Each
// row hashes every column the events decide (the references' own ids are left out: they number
// the rows in the order they were written).
func (s *Store) Checksum(ctx context.Context, tenant domain.TenantID, tables Tables) (Summary, error) {
	var sum Summary
	if err := tables.Validate(); err != nil {
		return sum, err
	}
	db, err := s.router.DB(ctx, tenant)
	if err != nil {
		return sum, fmt.Errorf("filedb: checksum: %w", err)
	}
	if sum.Files, err = tableset.Summarize(ctx, db, pkgName, tables.Files, "file_id, uploader_id, name, content_type, size, object_key, "+
		"sha256, status, audit_status, audit_reason, ref_count, version, created_at, COALESCE(uploaded_at, ''), "+
		"COALESCE(audited_at, ''), COALESCE(deleted_at, '')"); err != nil {
		return sum, err
	}
	sum.Refs, err = tableset.Summarize(ctx, db, pkgName, tables.Refs, "group_id, file_id, source_topic, source_seq, created_by, created_at")
	return sum, err
}
