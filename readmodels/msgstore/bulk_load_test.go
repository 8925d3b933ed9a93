package msgstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// rawSent is a sent event with content and head as given, so the test can put bytes in them that
// a loaded row must escape.
func rawSent(t *testing.T, tenant domain.TenantID, topic string, seq int64, from domain.UserID, clientID, content string, head domain.Head) domain.Envelope {
	t.Helper()
	tp := rmtest.Topic(t, topic)
	p := domain.MessageSent{MessageID: fmt.Sprintf("%s-%d", topic, seq), Topic: topic, GroupID: tp.GroupID(), Seq: seq, From: from,
		ClientMsgID: clientID, MsgType: domain.MsgText, Content: json.RawMessage(content), Head: head,
		SentAt: rmtest.SentAt.Add(time.Duration(seq) * time.Millisecond)}
	if tp.Kind() == domain.TopicDirect {
		p.To = tp.Peer(from)
	}
	env, err := domain.NewEnvelope(tenant, topic, seq, domain.SentEventType(tp.Kind()), domain.Actor{Type: domain.ActorUser, ID: from.String()}, p)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// bulkHistory is a history with long runs of sent events (loaded with LOAD DATA), short runs
// (INSERT), awkward bytes, a sent event delivered twice under two event ids, and every other
// message event between the runs.
func bulkHistory(t *testing.T, tenant domain.TenantID) [][]domain.Envelope {
	t.Helper()
	var first []domain.Envelope
	for seq := int64(1); seq <= 150; seq++ {
		first = append(first, rmtest.Sent(t, tenant, "grp7", seq, domain.UserID(1+seq%7), fmt.Sprintf("message %d", seq)))
		if seq%3 == 0 {
			first = append(first, rmtest.Sent(t, tenant, "p2p10_20", seq/3, domain.UserID(10+10*(seq%2)), "direct"))
		}
	}
	first = append(first,
		rawSent(t, tenant, "grp7", 151, 3, "tab", "{\"k\":\t\"a\\\\b \\\"q\\\" \\t \\n \\u0000 ✓ 😀\",\n\"n\": null}\r\n", domain.Head{Mentions: []domain.UserID{4, 5}, ReplySeq: 2}),
		rawSent(t, tenant, "grp7", 152, 3, "", `"\\N"`, domain.Head{MentionAll: true, RootSeq: 1}),
		rawSent(t, tenant, "grp7", 153, 4, "c\\N\tx\ny\\", `[]`, domain.Head{}),
	)
	// The same message sent again under a new event id: the first row wins.
	first = append(first, rawSent(t, tenant, "grp7", 20, 1, "again", `"second copy"`, domain.Head{}))
	second := []domain.Envelope{
		rmtest.Recalled(t, tenant, "grp7", 5, 6),
		rmtest.Edited(t, tenant, "grp7", 6, 7, 2, "edited"),
		rmtest.Sent(t, tenant, "grp7", 154, 2, "between"),
		rmtest.Deleted(t, tenant, "grp7", 7, 3),
		rmtest.ReadMarked(t, tenant, "grp7", 3, 100, 120),
		rmtest.ReadMarked(t, tenant, "p2p10_20", 20, 10, 40),
		rmtest.Edited(t, tenant, "p2p10_20", 2, 10, 2, "direct edit"),
		rmtest.Recalled(t, tenant, "p2p10_20", 3, 20),
		rmtest.Deleted(t, tenant, "p2p10_20", 4, 10),
	}
	for seq := int64(155); seq <= 260; seq++ {
		second = append(second, rmtest.Sent(t, tenant, "grp8", seq, domain.UserID(1+seq%3), "late run"))
	}
	second = append(second, rmtest.Edited(t, tenant, "grp8", 200, 2, 2, "edited in the same batch"))
	return [][]domain.Envelope{first, second}
}

// tableRows returns every row of table without the auto-increment id, as text, in key order.
func tableRows(ctx context.Context, t *testing.T, db *sql.DB, table, orderBy string) []string {
	t.Helper()
	rows, err := db.QueryContext(ctx, "SELECT * FROM `"+table+"` ORDER BY "+orderBy)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for i, v := range vals {
			if cols[i] == "id" {
				continue
			}
			fmt.Fprintf(&b, "%s=%q/%v ", cols[i], v.String, v.Valid)
		}
		out = append(out, b.String())
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// createTable returns SHOW CREATE TABLE of table with its name and AUTO_INCREMENT left out.
func createTable(ctx context.Context, t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	var name, ddl string
	if err := db.QueryRowContext(ctx, "SHOW CREATE TABLE `"+table+"`").Scan(&name, &ddl); err != nil {
		t.Fatal(err)
	}
	ddl = strings.Replace(ddl, "`"+table+"`", "`T`", 1)
	return regexp.MustCompile(` AUTO_INCREMENT=\d+`).ReplaceAllString(ddl, "")
}

func TestBulkLoadWritesWhatApplyWrites(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	db := f.db(ctx, t)
	fresh := f.tables.WithSuffix("_bulk")
	bl, err := f.store.StartBulkLoad(ctx, f.tenant, f.tables, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if got := createTable(ctx, t, db, fresh.GroupMessages); strings.Contains(got, "KEY `idx_") || !strings.Contains(got, "UNIQUE KEY `uk_im_group_messages_topic_sender_client_mid`") {
		t.Fatalf("fresh group table during the load:\n%s", got)
	}
	for i, batch := range bulkHistory(t, f.tenant) {
		want, err := f.store.Apply(ctx, f.tenant, group, f.tables, batch)
		if err != nil {
			t.Fatalf("apply batch %d: %v", i, err)
		}
		got, err := bl.Apply(ctx, batch)
		if err != nil || got != want {
			t.Fatalf("bulk load batch %d: %d, %v; Apply applied %d", i, got, err, want)
		}
	}
	if err := bl.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bl.Finish(ctx); err != nil {
		t.Fatalf("second Finish: %v", err)
	}
	live, loaded := f.tables, bl.Tables()
	for _, tc := range []struct{ live, loaded, order string }{
		{live.GroupMessages, loaded.GroupMessages, "topic, seqid"},
		{live.DirectMessages, loaded.DirectMessages, "topic, seqid"},
		{live.ReadMarks, loaded.ReadMarks, "user_id, topic"},
		{live.Deletions, loaded.Deletions, "user_id, topic, seqid"},
	} {
		a, b := tableRows(ctx, t, db, tc.live, tc.order), tableRows(ctx, t, db, tc.loaded, tc.order)
		if len(a) == 0 || strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Errorf("%s and %s differ:\n%s\n----\n%s", tc.live, tc.loaded, strings.Join(a, "\n"), strings.Join(b, "\n"))
		}
		if x, y := createTable(ctx, t, db, tc.live), createTable(ctx, t, db, tc.loaded); x != y {
			t.Errorf("after Finish %s is defined as\n%s\nnot as %s:\n%s", tc.loaded, y, tc.live, x)
		}
	}
	a, err := f.store.Checksum(ctx, f.tenant, live)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.store.Checksum(ctx, f.tenant, loaded)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 3 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("checksums differ: %+v vs %+v", a, b)
	}
	// The awkward bytes came through (the envelope compacts the content JSON).
	msgs, _, err := f.store.Page(ctx, f.tenant, loaded, msgstore.PageQuery{Topic: rmtest.Topic(t, "grp7"), AfterSeq: 150, Limit: 3})
	if err != nil || len(msgs) != 3 || string(msgs[0].Content) != `{"k":"a\\b \"q\" \t \n \u0000 ✓ 😀","n":null}` ||
		string(msgs[1].Content) != `"\\N"` || msgs[2].ClientMsgID != "c\\N\tx\ny\\" {
		t.Fatalf("loaded awkward rows: %+v, %v", msgs, err)
	}
	if c, err := f.store.Counts(ctx, f.tenant, loaded); err != nil || c.GroupMessages != 260 {
		t.Fatalf("loaded counts %+v, %v; want 260 group messages", c, err)
	}
}

func TestBulkLoadFailsWhereApplyFails(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	// A client message id longer than the column (the domain never writes one): LOAD DATA would
	// truncate it with a warning, so the batch is written again with INSERT, which leaves the id
	// out as Apply does and keeps the message.
	var batch []domain.Envelope
	for seq := int64(1); seq <= 100; seq++ {
		id := fmt.Sprintf("c%d", seq)
		if seq == 50 {
			id = strings.Repeat("x", 65)
		}
		batch = append(batch, rawSent(t, f.tenant, "grp7", seq, 1, id, `"m"`, domain.Head{}))
	}
	if _, err := f.store.Apply(ctx, f.tenant, group, f.tables, batch); err != nil {
		t.Fatal(err)
	}
	bl, err := f.store.StartBulkLoad(ctx, f.tenant, f.tables, f.tables.WithSuffix("_bulk"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bl.Apply(ctx, batch); err != nil {
		t.Fatal(err)
	}
	db := f.db(ctx, t)
	live := tableRows(ctx, t, db, f.tables.GroupMessages, "topic, seqid")
	loaded := tableRows(ctx, t, db, bl.Tables().GroupMessages, "topic, seqid")
	if len(live) != 100 || strings.Join(live, "\n") != strings.Join(loaded, "\n") {
		t.Fatalf("live %d rows, loaded %d, or they differ", len(live), len(loaded))
	}
	if !strings.Contains(live[49], `client_msg_id=""/false`) || !strings.Contains(live[49], `content="\"m\""/true`) {
		t.Fatalf("seq 50 with an over-long client id: %s", live[49])
	}
	// A recall of a message the history never sent fails as in Apply.
	recall := rmtest.Recalled(t, f.tenant, "grp9", 1, 1)
	_, err = bl.Apply(ctx, []domain.Envelope{recall})
	var ee *msgstore.EventError
	if !errors.As(err, &ee) || ee.EventID != recall.EventID || !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("recall of a missing message: %v", err)
	}
}

func TestStartBulkLoadRefusesTheLiveTables(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	fresh := f.tables.WithSuffix("_bulk")
	fresh.ReadMarks = f.tables.ReadMarks
	if _, err := f.store.StartBulkLoad(ctx, f.tenant, f.tables, fresh); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("bulk load into a live table: %v", err)
	}
	if c, err := f.store.Counts(ctx, f.tenant, f.tables); err != nil || c != (msgstore.TableCounts{}) {
		t.Fatalf("live tables after the refusal: %+v, %v", c, err)
	}
}
