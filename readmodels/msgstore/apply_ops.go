package msgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// messageTable returns the table holding topic's messages.
func messageTable(t Tables, topic domain.Topic) string {
	if topic.Kind() == domain.TopicGroup {
		return t.GroupMessages
	}
	return t.DirectMessages
}

// applyRecall marks the message recalled and drops its content. Assignments run left to right, so
// the IF()s see the status before this statement changes it; a repeated recall changes nothing,
// and so does a recall of a seq that holds a marker (a message retention expired).
func applyRecall(ctx context.Context, tx *sql.Tx, tables Tables, o op) error {
	r := o.recall
	table := messageTable(tables, o.topic)
	at := o.at(r.RecalledAt)
	stmt := "UPDATE " + q(table) + " SET" +
		" version = IF(status = 'recalled', version, version + 1)," +
		" recalled_at = IF(status = 'recalled', recalled_at, ?)," +
		" recalled_by = IF(status = 'recalled', recalled_by, ?)," +
		" updated_at = IF(status = 'recalled', updated_at, ?)," +
		" content = NULL, head = NULL, mentioned_user_ids = NULL, mention_all = 0, content_size = 0," +
		" status = 'recalled'" +
		" WHERE topic = ? AND seqid = ? AND status <> '" + readmodels.StatusSkipped + "'"
	res, err := tx.ExecContext(ctx, stmt, at, r.By.Int64(), at, o.topic.String(), r.Seq)
	if err != nil {
		return tenantdb.WrapErr("apply: recall", err)
	}
	return requireRow(ctx, tx, table, o, res)
}

// applyEdit replaces the content if the edit is newer than the stored version and the message is
// neither recalled nor a marker (a skipped seq, or a message retention expired); otherwise it is a stale or moot edit and changes nothing. An accepted edit makes a
// blocked message normal again. New content the server refuses (tenantdb.IsDataError) is
// applied as a refused edit: the version moves on as the edit says, the message becomes a
// placeholder (StatusBlocked, no content), so later edits and a recall still apply.
func applyEdit(ctx context.Context, tx *sql.Tx, tables Tables, o op) error {
	e := o.edit
	table := messageTable(tables, o.topic)
	if !o.refused {
		res, err := tx.ExecContext(ctx, editStmt(table, o, false), string(e.Content), len(e.Content), e.EditVersion, o.at(e.EditedAt),
			o.topic.String(), e.Seq, e.EditVersion)
		if err == nil {
			return requireRow(ctx, tx, table, o, res)
		}
		if !tenantdb.IsDataError(err) {
			return tenantdb.WrapErr("apply: edit", err)
		}
	}
	res, err := tx.ExecContext(ctx, editStmt(table, o, true), nil, 0, e.EditVersion, o.at(e.EditedAt),
		o.topic.String(), e.Seq, e.EditVersion)
	if err != nil {
		return tenantdb.WrapErr("apply: refused edit", err)
	}
	return requireRow(ctx, tx, table, o, res)
}

// editStmt is the UPDATE of an edit; refused writes the placeholder of content the store refused.
// Its arguments are content, content_size, version, updated_at, topic, seq and the version again.
func editStmt(table string, o op, refused bool) string {
	status, audit, risk := readmodels.StatusNormal, auditPass, "0"
	if refused {
		status, audit, risk = readmodels.StatusBlocked, auditReject, "1"
	}
	set := "UPDATE " + q(table) + " SET content = ?, content_size = ?, version = ?, updated_at = ?, status = '" + status + "'"
	if o.topic.Kind() == domain.TopicGroup {
		set += ", has_risk = " + risk + ", audit_status = '" + audit + "'"
	}
	return set + " WHERE topic = ? AND seqid = ? AND status NOT IN ('recalled', '" + readmodels.StatusSkipped + "') AND version < ?"
}

// requireRow turns "no row changed" into domain.ErrNotFound when the message is not in the read
// model at all. Events of a conversation arrive in order, so a recall or edit of a message the
// read model never received means its sent event was lost or parked.
func requireRow(ctx context.Context, tx *sql.Tx, table string, o op, res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return tenantdb.WrapErr("apply: rows affected", err)
	}
	if n > 0 {
		return nil
	}
	var one int
	err = tx.QueryRowContext(ctx, "SELECT 1 FROM "+q(table)+" WHERE topic = ? AND seqid = ?", o.topic.String(), o.seq()).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s of %s seq %d: message not in the read model: %w", o.action, o.topic, o.seq(), domain.ErrNotFound)
	}
	return tenantdb.WrapErr("apply: find message", err)
}

// insertDeletions hides each op's message from its user (deletionStmts).
func insertDeletions(ctx context.Context, tx *sql.Tx, table string, ops []op) error {
	return execStmts(ctx, tx, deletionStmts(table, ops), "apply: delete for user")
}

// deletionStmts returns the inserts of ops' delete-for-me rows; a deletion that exists is kept.
func deletionStmts(table string, ops []op) []stmt {
	var out []stmt
	for start := 0; start < len(ops); start += maxRowsPerInsert {
		chunk := ops[start:min(start+maxRowsPerInsert, len(ops))]
		args := make([]any, 0, 4*len(chunk))
		for _, o := range chunk {
			args = append(args, o.del.User.Int64(), o.topic.String(), o.del.Seq, o.at(o.del.DeletedAt))
		}
		out = append(out, stmt{Query: "INSERT INTO " + q(table) + " (user_id, topic, seqid, deleted_at) VALUES " +
			tableset.RowPlaceholders(len(chunk), 4) + " ON DUPLICATE KEY UPDATE user_id = user_id", Args: args})
	}
	return out
}
