package msgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// PageQuery selects a page of one topic's messages.
type PageQuery struct {
	Topic     domain.Topic
	Viewer    domain.UserID // messages Viewer deleted for themselves are left out; 0 leaves none out
	AfterSeq  int64         // exclusive lower bound; 0 for none
	BeforeSeq int64         // exclusive upper bound; 0 for none
	UpTo      int64         // inclusive upper bound (the watermark); 0 for none
	Limit     int           // page size, at least 1
	Newest    bool          // take the Limit highest seqs in range instead of the lowest
}

// Page returns up to pq.Limit messages of the range in ascending seq order, and whether the range
// holds more beyond the page (above it, or below it when pq.Newest). Recalled messages come back as
// placeholders without content; seq-skip markers are not messages and never come back.
func (s *Store) Page(ctx context.Context, tenant domain.TenantID, tables Tables, pq PageQuery) ([]readmodels.Message, bool, error) {
	if pq.Limit < 1 || pq.Topic.IsZero() {
		return nil, false, fmt.Errorf("page: topic and a positive limit are required: %w", domain.ErrInvalid)
	}
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return nil, false, fmt.Errorf("page: %w", err)
	}
	table := messageTable(tables, pq.Topic)
	toCol := "0"
	if pq.Topic.Kind() == domain.TopicDirect {
		toCol = "m.to_user"
	}
	stmt := "SELECT m.seqid, m.from_user, " + toCol + ", m.client_msg_id, m.msg_type, m.status, m.content, m.head," +
		" m.version, m.created_at, m.updated_at, m.recalled_at, m.recalled_by FROM " + q(table) + " m" +
		" WHERE m.topic = ? AND m.seqid > ? AND m.status <> '" + readmodels.StatusSkipped + "'"
	args := []any{pq.Topic.String(), max(pq.AfterSeq, 0)}
	if pq.BeforeSeq > 0 {
		stmt += " AND m.seqid < ?"
		args = append(args, pq.BeforeSeq)
	}
	if pq.UpTo > 0 {
		stmt += " AND m.seqid <= ?"
		args = append(args, pq.UpTo)
	}
	if pq.Viewer > 0 {
		stmt += " AND NOT EXISTS (SELECT 1 FROM " + q(tables.Deletions) + " d WHERE d.user_id = ? AND d.topic = m.topic AND d.seqid = m.seqid)"
		args = append(args, pq.Viewer.Int64())
	}
	if pq.Newest {
		stmt += " ORDER BY m.seqid DESC LIMIT ?"
	} else {
		stmt += " ORDER BY m.seqid ASC LIMIT ?"
	}
	args = append(args, pq.Limit+1)
	rows, err := db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, false, tenantdb.WrapErr("page", err)
	}
	defer rows.Close()
	msgs := make([]readmodels.Message, 0, pq.Limit+1)
	for rows.Next() {
		m, err := scanMessage(rows, pq.Topic.String())
		if err != nil {
			return nil, false, tenantdb.WrapErr("page", err)
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, false, tenantdb.WrapErr("page", err)
	}
	more := len(msgs) > pq.Limit
	if more {
		msgs = msgs[:pq.Limit]
	}
	if pq.Newest {
		for i, j := 0, len(msgs)-1; i < j; i, j = i+1, j-1 {
			msgs[i], msgs[j] = msgs[j], msgs[i]
		}
	}
	return msgs, more, nil
}

func scanMessage(rows *sql.Rows, topic string) (readmodels.Message, error) {
	var (
		m                 readmodels.Message
		from, to          int64
		clientID          sql.NullString
		content, head     []byte
		recalledAt        sql.NullTime
		recalledBy        sql.NullInt64
		msgType           string
		sentAt, updatedAt time.Time
	)
	if err := rows.Scan(&m.Seq, &from, &to, &clientID, &msgType, &m.Status, &content, &head,
		&m.Version, &sentAt, &updatedAt, &recalledAt, &recalledBy); err != nil {
		return m, err
	}
	m.Topic = topic
	m.From, m.To = domain.UserID(from), domain.UserID(to)
	m.ClientMsgID = clientID.String
	m.MsgType = domain.MsgType(msgType)
	m.SentAt, m.UpdatedAt = sentAt.UTC(), updatedAt.UTC()
	if len(content) > 0 {
		m.Content = json.RawMessage(content)
	}
	if len(head) > 0 {
		var h domain.Head
		if err := json.Unmarshal(head, &h); err != nil {
			return m, fmt.Errorf("seq %d: head: %w", m.Seq, err)
		}
		m.Head = readmodels.HeadOf(h)
	}
	if recalledAt.Valid {
		t := recalledAt.Time.UTC()
		m.RecalledAt = &t
	}
	m.RecalledBy = domain.UserID(recalledBy.Int64)
	m.Redact()
	return m, nil
}

// LastSeq returns the highest seq the read model holds for topic (a message or a seq-skip
// marker), 0 if none. Seqs below it may still be missing: readers answer with Watermark.
func (s *Store) LastSeq(ctx context.Context, tenant domain.TenantID, tables Tables, topic domain.Topic) (int64, error) {
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return 0, fmt.Errorf("last seq: %w", err)
	}
	var last int64
	err = db.QueryRowContext(ctx, "SELECT COALESCE(MAX(seqid), 0) FROM "+q(messageTable(tables, topic))+" WHERE topic = ?", topic.String()).Scan(&last)
	if err != nil {
		return 0, tenantdb.WrapErr("last seq", err)
	}
	return last, nil
}

// LastSeqs returns LastSeq of every topic, keyed by topic name; topics without messages map to 0.
func (s *Store) LastSeqs(ctx context.Context, tenant domain.TenantID, tables Tables, topics []domain.Topic) (map[string]int64, error) {
	out := make(map[string]int64, len(topics))
	if len(topics) == 0 {
		return out, nil
	}
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return nil, fmt.Errorf("last seqs: %w", err)
	}
	byTable := map[string][]any{}
	for _, t := range topics {
		out[t.String()] = 0
		table := messageTable(tables, t)
		byTable[table] = append(byTable[table], t.String())
	}
	for table, names := range byTable {
		for start := 0; start < len(names); start += 500 {
			chunk := names[start:min(start+500, len(names))]
			rows, err := db.QueryContext(ctx, "SELECT topic, MAX(seqid) FROM "+q(table)+" WHERE topic IN ("+tableset.Placeholders(len(chunk))+") GROUP BY topic", chunk...)
			if err != nil {
				return nil, tenantdb.WrapErr("last seqs", err)
			}
			for rows.Next() {
				var topic string
				var last int64
				if err := rows.Scan(&topic, &last); err != nil {
					rows.Close()
					return nil, tenantdb.WrapErr("last seqs", err)
				}
				out[topic] = last
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return nil, tenantdb.WrapErr("last seqs", err)
			}
		}
	}
	return out, nil
}

// ReadMark is one user's position in one topic.
type ReadMark struct {
	Topic     string
	ReadSeq   int64
	RecvSeq   int64
	UpdatedAt time.Time
}

// ReadMarks returns every read mark of user, sorted by topic.
func (s *Store) ReadMarks(ctx context.Context, tenant domain.TenantID, tables Tables, user domain.UserID) ([]ReadMark, error) {
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return nil, fmt.Errorf("read marks: %w", err)
	}
	rows, err := db.QueryContext(ctx, "SELECT topic, read_seq, recv_seq, updated_at FROM "+q(tables.ReadMarks)+" WHERE user_id = ? ORDER BY topic", user.Int64())
	if err != nil {
		return nil, tenantdb.WrapErr("read marks", err)
	}
	defer rows.Close()
	var out []ReadMark
	for rows.Next() {
		var m ReadMark
		if err := rows.Scan(&m.Topic, &m.ReadSeq, &m.RecvSeq, &m.UpdatedAt); err != nil {
			return nil, tenantdb.WrapErr("read marks", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, tenantdb.WrapErr("read marks", err)
	}
	return out, nil
}

// ReadMarkOf returns user's read mark in topic; found is false when the user has none.
func (s *Store) ReadMarkOf(ctx context.Context, tenant domain.TenantID, tables Tables, user domain.UserID, topic domain.Topic) (m ReadMark, found bool, err error) {
	db, err := s.db(ctx, tenant, tables)
	if err != nil {
		return m, false, fmt.Errorf("read mark: %w", err)
	}
	m.Topic = topic.String()
	err = db.QueryRowContext(ctx, "SELECT read_seq, recv_seq, updated_at FROM "+q(tables.ReadMarks)+" WHERE user_id = ? AND topic = ?",
		user.Int64(), topic.String()).Scan(&m.ReadSeq, &m.RecvSeq, &m.UpdatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return m, false, nil
	}
	if err != nil {
		return m, false, tenantdb.WrapErr("read mark", err)
	}
	return m, true, nil
}
