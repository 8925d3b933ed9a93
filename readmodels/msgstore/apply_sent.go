package msgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/tableset"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// Limits of one multi-row INSERT: rows per statement and bytes of content per statement (well
// under the default 16 MiB max_allowed_packet).
const (
	maxRowsPerInsert  = 200
	maxBytesPerInsert = 4 << 20
)

// groupColumns are the columns of a group message row; has_risk and audit_status mark a row whose
// content the server refused (see placeholder rows below); file_count is the number of files
// the message references (head.files).
const groupColumns = "topic, group_id, seqid, from_user, client_msg_id, msg_type, status, content, head, " +
	"mentioned_user_ids, mention_all, reply_seqid, root_seqid, content_size, version, created_at, updated_at, " +
	"has_risk, audit_status, file_count"

// directColumns are the columns of a 1:1 message row; im_messages has no audit columns, so a
// refused row is marked by its status alone.
const directColumns = "topic, seqid, from_user, to_user, client_msg_id, msg_type, status, content, head, " +
	"mentioned_user_ids, mention_all, reply_seqid, root_seqid, content_size, version, created_at, updated_at"

// Audit values of a group message row (seed 000 §6.2: audit_status pass/pending/reject).
const (
	auditPass   = "pass"
	auditReject = "reject"
)

// markRow is one read-mark upsert.
type markRow struct {
	user       domain.UserID
	topic      string
	read, recv int64
	at         time.Time
}

// messageWriter writes the message rows of ops to table: columns names them, row gives one op's
// values in that order. A row whose topic and seq (or sender and client message id) already
// exist must be left as it is.
type messageWriter func(ctx context.Context, tx *sql.Tx, table, columns string, ops []op, row func(op) []any) error

// insertSent writes the messages of a run of sent events with write and moves the read marks
// they imply.
func insertSent(ctx context.Context, tx *sql.Tx, tables Tables, run []op, write messageWriter) error {
	group, direct, marks := sentParts(run)
	if len(group) > 0 {
		if err := write(ctx, tx, tables.GroupMessages, groupColumns, group, groupRow); err != nil {
			return err
		}
	}
	if len(direct) > 0 {
		if err := write(ctx, tx, tables.DirectMessages, directColumns, direct, directRow); err != nil {
			return err
		}
	}
	return upsertReadMarks(ctx, tx, tables.ReadMarks, marks)
}

// sentParts splits a run of sent events into group and direct messages and the read marks they
// move: each sender's to the highest seq it sent in a topic (their own messages are read), and a
// 1:1 receiver's to 0 so the conversation shows in their unread list.
func sentParts(run []op) (group, direct []op, marks []markRow) {
	byKey := map[[2]string]int{}
	mark := func(u domain.UserID, topic string, seq int64, at time.Time) {
		k := [2]string{u.String(), topic}
		i, ok := byKey[k]
		if !ok {
			byKey[k] = len(marks)
			marks = append(marks, markRow{user: u, topic: topic, read: seq, recv: seq, at: at})
			return
		}
		if m := &marks[i]; seq > m.read {
			m.read, m.recv, m.at = seq, seq, at
		}
	}
	groups := 0
	for _, o := range run {
		if o.topic.Kind() == domain.TopicGroup {
			groups++
		}
	}
	group, direct = make([]op, 0, groups), make([]op, 0, len(run)-groups) // ops are large: no regrowing
	for _, o := range run {
		at := o.at(o.sent.SentAt)
		mark(o.sent.From, o.topic.String(), o.sent.Seq, at)
		if o.topic.Kind() == domain.TopicGroup {
			group = append(group, o)
			continue
		}
		direct = append(direct, o)
		mark(receiver(o), o.topic.String(), 0, at)
	}
	return group, direct, marks
}

// receiver is the other party of a 1:1 message.
func receiver(o op) domain.UserID {
	if o.sent.To > 0 {
		return o.sent.To
	}
	return o.topic.Peer(o.sent.From)
}

// insertMessages writes ops in multi-row INSERTs (messageChunks). When the server refuses a
// value of a statement (tenantdb.IsDataError: content that is not JSON it accepts, nested too
// deep, not UTF-8, too long), the statement did nothing and its rows are written one at a time:
// a row the server refuses is written again as a placeholder (insertOne), so one bad message
// never holds up the others, and its seq stays in the conversation.
func insertMessages(ctx context.Context, tx *sql.Tx, table, columns string, ops []op, row func(op) []any) error {
	for _, c := range messageChunks(table, columns, ops, row) {
		_, err := tx.ExecContext(ctx, c.Query, c.Args...)
		if err == nil {
			continue
		}
		if !tenantdb.IsDataError(err) {
			return tenantdb.WrapErr("apply: insert messages into "+table, err)
		}
		for _, o := range c.ops {
			if err := insertOne(ctx, tx, table, columns, o, row); err != nil {
				return err
			}
		}
	}
	return nil
}

// insertOne writes the row of one sent event, as a placeholder if the server refuses it. A
// placeholder the server refuses too (no known value can cause that) is an *EventError wrapping
// domain.ErrInvalid.
func insertOne(ctx context.Context, tx *sql.Tx, table, columns string, o op, row func(op) []any) error {
	if !o.refused {
		st := messageChunks(table, columns, []op{o}, row)[0]
		_, err := tx.ExecContext(ctx, st.Query, st.Args...)
		if err == nil {
			return nil
		}
		if !tenantdb.IsDataError(err) {
			return tenantdb.WrapErr("apply: insert message into "+table, err)
		}
		o.refused = true
	}
	st := messageChunks(table, columns, []op{o}, row)[0]
	_, err := tx.ExecContext(ctx, st.Query, st.Args...)
	if tenantdb.IsDataError(err) {
		return eventErr(o, bad("payload", "the message is refused by the store even without its content: "+err.Error()))
	}
	return tenantdb.WrapErr("apply: insert placeholder into "+table, err)
}

// messageChunk is one multi-row INSERT and the ops whose rows it writes.
type messageChunk struct {
	stmt
	ops []op
}

// messageStmts returns the statements of messageChunks.
func messageStmts(table, columns string, ops []op, row func(op) []any) []stmt {
	chunks := messageChunks(table, columns, ops, row)
	out := make([]stmt, len(chunks))
	for i, c := range chunks {
		out[i] = c.stmt
	}
	return out
}

// messageChunks returns the multi-row INSERTs of ops' message rows. A row whose topic and seq (or
// sender and client message id) already exist is left as it is: the message was applied before,
// perhaps edited or recalled since, and a redelivered sent event must not undo that.
func messageChunks(table, columns string, ops []op, row func(op) []any) []messageChunk {
	prefix := "INSERT INTO " + q(table) + " (" + columns + ") VALUES "
	const suffix = " ON DUPLICATE KEY UPDATE id = id"
	var out []messageChunk
	for start := 0; start < len(ops); {
		end, bytes := start, 0
		for end < len(ops) && end-start < maxRowsPerInsert && (end == start || bytes+len(ops[end].sent.Content) <= maxBytesPerInsert) {
			bytes += len(ops[end].sent.Content)
			end++
		}
		args := make([]any, 0, (end-start)*20)
		width := 0
		for _, o := range ops[start:end] {
			r := row(o)
			width = len(r)
			args = append(args, r...)
		}
		out = append(out, messageChunk{stmt: stmt{Query: prefix + tableset.RowPlaceholders(end-start, width) + suffix, Args: args},
			ops: ops[start:end]})
		start = end
	}
	return out
}

// sentColumnCount is how many values sentColumns appends.
const sentColumnCount = 13

func groupRow(o op) []any {
	m := o.sent
	row := make([]any, 0, 4+sentColumnCount+3)
	row = sentColumns(append(row, o.topic.String(), o.topic.GroupID(), m.Seq, m.From.Int64()), o)
	if o.refused {
		return append(row, true, auditReject, 0)
	}
	return append(row, false, auditPass, len(m.Head.Files))
}

func directRow(o op) []any {
	m := o.sent
	row := make([]any, 0, 4+sentColumnCount)
	return sentColumns(append(row, o.topic.String(), m.Seq, m.From.Int64(), receiver(o).Int64()), o)
}

// sentColumns appends to row the values from client_msg_id to updated_at, shared by both
// tables (sentColumnCount of them). A client message id or message type the columns cannot hold
// (the domain never writes one) is left out rather than failing the row. The row of a refused op
// is a placeholder: status blocked, no content, head or mentions.
func sentColumns(row []any, o op) []any {
	m := o.sent
	at := o.at(m.SentAt)
	msgType := m.MsgType
	if msgType == "" || len(msgType) > maxMsgTypeLen || !utf8.ValidString(string(msgType)) {
		msgType = domain.MsgText
	}
	clientID := m.ClientMsgID
	if len(clientID) > maxClientMsgIDLen || !utf8.ValidString(clientID) {
		clientID = ""
	}
	if o.refused {
		return append(row,
			nullString(clientID), string(msgType), readmodels.StatusBlocked, nil, nil,
			nil, false, nullInt(m.Head.ReplySeq), nullInt(m.Head.RootSeq),
			0, 1, at, at,
		)
	}
	var content any
	if len(m.Content) > 0 {
		content = string(m.Content)
	}
	return append(row,
		nullString(clientID), string(msgType), readmodels.StatusNormal, content, headJSON(m.Head),
		mentionsJSON(m.Head.Mentions), m.Head.MentionAll, nullInt(m.Head.ReplySeq), nullInt(m.Head.RootSeq),
		len(m.Content), 1, at, at,
	)
}

// Widths of client_msg_id (VARCHAR(64)) and msg_type (VARCHAR(32)); the domain's ids and types
// are ASCII, so bytes are characters.
const (
	maxClientMsgIDLen = 64
	maxMsgTypeLen     = 32
)

// headJSON returns the head column value: NULL for an empty head.
func headJSON(h domain.Head) any {
	hp := readmodels.HeadOf(h)
	if hp == nil {
		return nil
	}
	b, err := json.Marshal(hp)
	if err != nil {
		return nil // a Head always marshals; unreachable
	}
	return string(b)
}

// mentionsJSON returns the mentioned_user_ids column: a JSON array of numbers, so JSON_CONTAINS
// finds a user, or NULL.
func mentionsJSON(ids []domain.UserID) any {
	if len(ids) == 0 {
		return nil
	}
	parts := make([]string, len(ids))
	for i, u := range ids {
		parts[i] = u.String()
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullInt(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

// upsertReadMarks moves read marks forward only (markStmts).
func upsertReadMarks(ctx context.Context, tx *sql.Tx, table string, rows []markRow) error {
	return execStmts(ctx, tx, markStmts(table, rows), "apply: upsert read marks")
}

// markStmts returns the upserts that move read marks forward only. Rows are sorted so concurrent
// batches lock them in the same order; the sort is stable and the server applies the rows of
// one statement in order, so rows of the same user and topic end as if upserted one by one.
func markStmts(table string, rows []markRow) []stmt {
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].user != rows[j].user {
			return rows[i].user < rows[j].user
		}
		return rows[i].topic < rows[j].topic
	})
	// Assignments run left to right, so updated_at is decided before read_seq and recv_seq change.
	const upsert = " ON DUPLICATE KEY UPDATE" +
		" updated_at = IF(VALUES(read_seq) > read_seq OR VALUES(recv_seq) > recv_seq, GREATEST(updated_at, VALUES(updated_at)), updated_at)," +
		" read_seq = GREATEST(read_seq, VALUES(read_seq))," +
		" recv_seq = GREATEST(recv_seq, VALUES(recv_seq))"
	var out []stmt
	for start := 0; start < len(rows); start += maxRowsPerInsert {
		chunk := rows[start:min(start+maxRowsPerInsert, len(rows))]
		args := make([]any, 0, 5*len(chunk))
		for _, r := range chunk {
			args = append(args, r.user.Int64(), r.topic, max(r.read, 0), max(r.recv, 0), r.at)
		}
		out = append(out, stmt{Query: "INSERT INTO " + q(table) + " (user_id, topic, read_seq, recv_seq, updated_at) VALUES " +
			tableset.RowPlaceholders(len(chunk), 5) + upsert, Args: args})
	}
	return out
}
