package msgstore

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// TopicSummary is one topic's share of a Checksum.
type TopicSummary struct {
	Rows      int64  // message rows
	Deletions int64  // delete-for-me rows
	ReadMarks int64  // read-mark rows
	Checksum  uint64 // XOR of a 64-bit hash of every row above; order-independent
}

// rowHash turns a canonical row string into 64 bits: the first 16 hex digits of its SHA-1.
func rowHash(expr string) string {
	return "CAST(CONV(LEFT(SHA1(" + expr + "), 16), 16, 10) AS UNSIGNED)"
}

// Checksum summarises the read model per topic so two copies (the live tables and a rebuild) can
// be compared: a message row hashes every column the events decide (seq, sender, status, version,
// content, head, recall author, client message id, type, mentions, reply and root seqs, content
// size, and the group, file count and audit columns of a group message or the receiver of a
// direct one); a delete-for-me row its user and seq; a read mark its user and seqs. Timestamps
// are left out, so a rebuild from the same events matches the live tables exactly.
func (s *Store) Checksum(ctx context.Context, tenant domain.TenantID, tables Tables) (map[string]TopicSummary, error) {
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return nil, fmt.Errorf("checksum: %w", err)
	}
	const msgCols = "'m', seqid, from_user, status, version, COALESCE(content, ''), COALESCE(head, ''), COALESCE(recalled_by, 0), " +
		"COALESCE(client_msg_id, ''), msg_type, COALESCE(mentioned_user_ids, ''), mention_all, COALESCE(reply_seqid, 0), " +
		"COALESCE(root_seqid, 0), content_size"
	groupHash := rowHash("CONCAT_WS('|', " + msgCols + ", group_id, file_count, has_risk, audit_status)")
	directHash := rowHash("CONCAT_WS('|', " + msgCols + ", to_user)")
	queries := []struct {
		stmt string
		add  func(*TopicSummary, int64, uint64)
	}{
		{"SELECT topic, COUNT(*), BIT_XOR(" + groupHash + ") FROM " + q(tables.GroupMessages) + " GROUP BY topic",
			func(t *TopicSummary, n int64, h uint64) { t.Rows += n; t.Checksum ^= h }},
		{"SELECT topic, COUNT(*), BIT_XOR(" + directHash + ") FROM " + q(tables.DirectMessages) + " GROUP BY topic",
			func(t *TopicSummary, n int64, h uint64) { t.Rows += n; t.Checksum ^= h }},
		{"SELECT topic, COUNT(*), BIT_XOR(" + rowHash("CONCAT_WS('|', 'd', user_id, seqid)") + ") FROM " + q(tables.Deletions) + " GROUP BY topic",
			func(t *TopicSummary, n int64, h uint64) { t.Deletions += n; t.Checksum ^= h }},
		{"SELECT topic, COUNT(*), BIT_XOR(" + rowHash("CONCAT_WS('|', 'r', user_id, read_seq, recv_seq)") + ") FROM " + q(tables.ReadMarks) + " GROUP BY topic",
			func(t *TopicSummary, n int64, h uint64) { t.ReadMarks += n; t.Checksum ^= h }},
	}
	out := map[string]TopicSummary{}
	for _, qu := range queries {
		rows, err := db.QueryContext(ctx, qu.stmt)
		if err != nil {
			return nil, tenantdb.WrapErr("checksum", err)
		}
		for rows.Next() {
			var topic string
			var n int64
			var h uint64
			if err := rows.Scan(&topic, &n, &h); err != nil {
				rows.Close()
				return nil, tenantdb.WrapErr("checksum", err)
			}
			sum := out[topic]
			qu.add(&sum, n, h)
			out[topic] = sum
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, tenantdb.WrapErr("checksum", err)
		}
	}
	return out, nil
}

// TableCounts is the number of rows of each read-model table.
type TableCounts struct {
	GroupMessages  int64
	DirectMessages int64
	ReadMarks      int64
	Deletions      int64
}

// Counts returns the row count of every table of tables.
func (s *Store) Counts(ctx context.Context, tenant domain.TenantID, tables Tables) (TableCounts, error) {
	var c TableCounts
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return c, fmt.Errorf("counts: %w", err)
	}
	stmt := "SELECT (SELECT COUNT(*) FROM " + q(tables.GroupMessages) + "), (SELECT COUNT(*) FROM " + q(tables.DirectMessages) +
		"), (SELECT COUNT(*) FROM " + q(tables.ReadMarks) + "), (SELECT COUNT(*) FROM " + q(tables.Deletions) + ")"
	if err := db.QueryRowContext(ctx, stmt).Scan(&c.GroupMessages, &c.DirectMessages, &c.ReadMarks, &c.Deletions); err != nil {
		return c, tenantdb.WrapErr("counts", err)
	}
	return c, nil
}
