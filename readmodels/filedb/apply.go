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
	"github.com/imledger/imledger/readmodels/internal/tablefold"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Tables names the tables of the files-refs read model. The projection, the file service and the
// queries use DefaultTables; a rebuild writes DefaultTables().WithSuffix("_rebuild") and then
// swaps them in (Model).
type Tables struct {
	Files string // im_files
	Refs  string // im_group_files
}

// DefaultTables returns the live table names created by the migrations.
func DefaultTables() Tables { return Tables{Files: "im_files", Refs: "im_group_files"} }

// WithSuffix returns t with s appended to every name, e.g. "_rebuild".
func (t Tables) WithSuffix(s string) Tables { return Tables{Files: t.Files + s, Refs: t.Refs + s} }

func (t Tables) list() []string { return []string{t.Files, t.Refs} }

// model is the files-refs read model as tablefold drives it. Each row hashes every column the
// events decide (the references' own ids are left out: they number the rows in the order they
// were written).
var model = tablefold.Model[Tables]{Pkg: "filedb", Live: DefaultTables(), Names: Tables.list, Decode: decodeOne,
	Columns: []string{
		"file_id, uploader_id, name, content_type, size, object_key, sha256, status, audit_status, audit_reason, ref_count, " +
			"version, created_at, COALESCE(uploaded_at, ''), COALESCE(audited_at, ''), COALESCE(deleted_at, '')",
		"group_id, file_id, source_topic, source_seq, created_by, created_at",
	}}

// Model returns the read model's tables as a rebuild drives them: fresh copies with a suffix
// created like the live ones, swapped in, dropped.
func Model() tablefold.Model[Tables] { return model }

// Validate checks that every name is 1 to 60 characters of [A-Za-z0-9_] and that they differ.
func (t Tables) Validate() error { return model.Validate(t) }

// EventError says which event of a batch could not be applied; Err wraps domain.ErrInvalid for
// an event that can never be applied.
type EventError = readmodels.EventError

// fileRef is one file reference of a sent message.
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
func decodeOne(tables Tables) func(int, domain.Envelope) (tablefold.Op, error) {
	files, refs := tableset.Quote(tables.Files), tableset.Quote(tables.Refs)
	return func(_ int, env domain.Envelope) (tablefold.Op, error) {
		v := env.StreamVersion
		op := func(stmt string, args ...any) tablefold.Op {
			return tablefold.Op{Stmt: fmt.Sprintf(stmt, files), Args: args}
		}
		switch env.EventType {
		case domain.EventGroupMessageSent, domain.EventDirectMessageSent:
			return decodeRefs(env, tables)
		case domain.EventFileCreated:
			var p domain.FileCreated
			if err := decodeFile(env, &p, func() string { return p.FileID }); err != nil {
				return tablefold.Op{}, err
			}
			return tablefold.Op{Stmt: fmt.Sprintf(createStmt, files, refs), Args: []any{p.FileID, p.Uploader.Int64(), p.Name, p.ContentType, p.Size,
				p.ObjectKey, p.FileID, readmodels.Millis(p.CreatedAt)}}, nil
		case domain.EventFileUploaded:
			var p domain.FileUploaded
			if err := decodeFile(env, &p, func() string { return p.FileID }); err != nil {
				return tablefold.Op{}, err
			}
			return op(uploadStmt, p.Size, p.SHA256, p.ObjectKey, p.ObjectKey, readmodels.Millis(p.UploadedAt), v, p.FileID, v-1), nil
		case domain.EventFileAudited:
			var p domain.FileAudited
			if err := decodeFile(env, &p, func() string { return p.FileID }); err != nil {
				return tablefold.Op{}, err
			}
			return op(auditStmt, p.Status, readmodels.FitChars(p.Reason, 128), readmodels.Millis(p.AuditedAt), v, p.FileID, v-1), nil
		case domain.EventFileDeleted:
			var p domain.FileDeleted
			if err := decodeFile(env, &p, func() string { return p.FileID }); err != nil {
				return tablefold.Op{}, err
			}
			return op(deleteStmt, readmodels.Millis(p.DeletedAt), v, p.FileID, v-1), nil
		case domain.EventFileRestored:
			var p domain.FileRestored
			if err := decodeFile(env, &p, func() string { return p.FileID }); err != nil {
				return tablefold.Op{}, err
			}
			return op(restoreStmt, v, p.FileID, v-1), nil
		}
		return tablefold.Op{}, nil
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

// decodeRefs returns the write of the references of a sent message's head.files to tables (none
// when the head names no file).
func decodeRefs(env domain.Envelope, tables Tables) (tablefold.Op, error) {
	var m domain.MessageSent
	if err := env.Decode(&m); err != nil {
		return tablefold.Op{}, eventdecode.Bad("payload", err.Error())
	}
	if len(m.Head.Files) == 0 {
		return tablefold.Op{}, nil
	}
	refs := make([]fileRef, 0, len(m.Head.Files))
	for _, f := range m.Head.Files {
		refs = append(refs, fileRef{group: m.GroupID, file: f, topic: m.Topic, seq: m.Seq, from: m.From.Int64(), at: readmodels.Millis(m.SentAt)})
	}
	return tablefold.Op{Run: func(ctx context.Context, tx *sql.Tx) (int, error) { return insertRefs(ctx, tx, tables, refs) }}, nil
}

// ApplyBatch folds one tenant's file events and sent messages into tables in one transaction and
// returns how many changed something: a file event writes its record (version-guarded), a sent
// message whose head names files inserts one reference per file (source_topic, source_seq; one
// it holds already is ignored) and recounts those files' references. Other event types are
// ignored. A single record change, as the file service writes after each event, is one
// statement, one round trip, as the record write before the read model was rebuildable.
//
// Errors: an *EventError wrapping domain.ErrInvalid for an event that can never be applied;
// domain.ErrNotFound (wrapped) for a tenant without a database; domain.ErrRetryable when MySQL is
// unreachable.
func (s *Store) ApplyBatch(ctx context.Context, tenant domain.TenantID, tables Tables, events []domain.Envelope) (int, error) {
	return model.Apply(ctx, s.router, tenant, tables, events)
}

// Apply is ApplyBatch to the live tables.
func (s *Store) Apply(ctx context.Context, tenant domain.TenantID, events []domain.Envelope) (int, error) {
	return s.ApplyBatch(ctx, tenant, DefaultTables(), events)
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

// Checksum summarises tables so two copies (the live tables and a rebuild) can be compared.
func (s *Store) Checksum(ctx context.Context, tenant domain.TenantID, tables Tables) (Summary, error) {
	sums, err := model.Checksum(ctx, s.router, tenant, tables)
	if err != nil {
		return Summary{}, err
	}
	return Summary{Files: sums[0], Refs: sums[1]}, nil
}
