package msgstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// expireChunk is how many rows one retention statement changes, so no statement holds row locks
// on a month of history at once.
const expireChunk = 5000

// Expired counts what ExpireBefore changed.
type Expired struct {
	Messages  int64 // message rows turned into markers
	Deletions int64 // delete-for-me rows removed
}

// ExpireBefore removes the tenant's message history sent in [from, until) from the live tables
// (from zero: no lower bound): each such message row becomes the content-less marker of its seq
// (status skipped, as a seq_skipped event leaves it: no sender, content, head, mentions or recall)
// so the topic's watermark and seqs stay as they were, and the delete-for-me rows made before
// until are deleted. It is what a rebuild derives from the events once message events older than
// the tenant's retention horizon are read as expired (see projections), so a verification
// after retention matches. Rows change in chunks of expireChunk, each its own transaction;
// running it again changes nothing more. Errors: domain.ErrRetryable when MySQL failed
// transiently (what was done stays done).
func (s *Store) ExpireBefore(ctx context.Context, tenant domain.TenantID, from, until time.Time) (Expired, error) {
	tables := DefaultTables()
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return Expired{}, fmt.Errorf("expire: %w", err)
	}
	lo, hi := readmodels.Millis(clampTime(from)), readmodels.Millis(clampTime(until))
	if from.IsZero() {
		lo = minDatetime
	}
	var out Expired
	const marker = " SET from_user = 0, client_msg_id = NULL, msg_type = '" + string(domain.MsgSystem) + "', status = '" +
		readmodels.StatusSkipped + "', content = NULL, head = NULL, mentioned_user_ids = NULL, mention_all = 0," +
		" reply_seqid = NULL, root_seqid = NULL, content_size = 0, version = 1, recalled_at = NULL, recalled_by = NULL," +
		" deleted_at = NULL, updated_at = created_at"
	stmts := []string{
		"UPDATE " + q(tables.GroupMessages) + marker + ", has_risk = 0, audit_status = '" + auditPass + "', file_count = 0" +
			" WHERE created_at >= ? AND created_at < ? AND status <> '" + readmodels.StatusSkipped + "' LIMIT " + fmt.Sprint(expireChunk),
		"UPDATE " + q(tables.DirectMessages) + marker + ", to_user = 0" +
			" WHERE created_at >= ? AND created_at < ? AND status <> '" + readmodels.StatusSkipped + "' LIMIT " + fmt.Sprint(expireChunk),
	}
	for _, st := range stmts {
		n, err := execChunks(ctx, db, st, lo, hi)
		out.Messages += n
		if err != nil {
			return out, tenantdb.WrapErr("expire messages", err)
		}
	}
	n, err := execChunks(ctx, db, "DELETE FROM "+q(tables.Deletions)+" WHERE deleted_at >= ? AND deleted_at < ? LIMIT "+fmt.Sprint(expireChunk), lo, hi)
	out.Deletions = n
	if err != nil {
		return out, tenantdb.WrapErr("expire deletions", err)
	}
	return out, nil
}

// execChunks runs stmt (which changes at most expireChunk rows) until it changes fewer, and
// returns how many rows it changed in all.
func execChunks(ctx context.Context, db *sql.DB, stmt string, args ...any) (int64, error) {
	var total int64
	for {
		res, err := db.ExecContext(ctx, stmt, args...)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, err
		}
		total += n
		if n < expireChunk {
			return total, nil
		}
	}
}
