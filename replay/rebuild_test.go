package replay_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/msgstore"
	"github.com/imledger/imledger/readmodels/sessions"
	"github.com/imledger/imledger/replay"
)

// TestRebuildAndVerify stores a history, projects it live, and checks that Verify finds no
// difference, that it reports exactly a deleted row, and that Rebuild restores it.
func TestRebuildAndVerify(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	tn := m.Tenant("rebuild")
	other := m.Tenant("bystander")
	store := projtest.NewEventStore(t, h.Pool)
	var history []domain.Envelope
	for g := int64(1); g <= 3; g++ {
		for seq := int64(1); seq <= 20; seq++ {
			history = append(history, projtest.SentEvent(tn, projtest.GroupTopic(g), seq, domain.UserID(seq%4+1), "m"))
		}
	}
	history = append(history,
		projtest.RecallEvent(tn, projtest.GroupTopic(1), 3, 4, 1),
		projtest.EditEvent(tn, projtest.GroupTopic(2), 4, 1, 2, "edited"),
		projtest.DeletionEvent(tn, projtest.GroupTopic(3), 5, 2, 1),
		projtest.SentEvent(other, projtest.GroupTopic(1), 1, 1, "not this tenant"))
	history = projtest.AppendAll(t, store, history)
	// The live tables, as the live projector leaves them.
	for _, tenant := range []domain.TenantID{tn, other} {
		var mine []domain.Envelope
		for _, e := range history {
			if e.TenantID == tenant {
				mine = append(mine, e)
			}
		}
		if _, err := m.Store.Apply(projtest.Ctx(t), tenant, projections.GroupMessagesMySQL, msgstore.DefaultTables(), mine); err != nil {
			t.Fatal(err)
		}
	}
	rb, err := replay.NewMessageRebuilder(m.Store, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	var report bytes.Buffer
	res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn, Out: &report})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || res.Parts != 3 || res.Events != 63 {
		t.Fatalf("verify of an intact read model: %+v\n%s", res, report.String())
	}

	db, err := m.Router.DB(projtest.Ctx(t), tn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(projtest.Ctx(t), "DELETE FROM im_group_messages WHERE topic = 'grp2' AND seqid = 7"); err != nil {
		t.Fatal(err)
	}
	report.Reset()
	res, err = rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn, Out: &report})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Diffs) != 1 || res.Diffs[0].Part != "grp2" || res.Diffs[0].Live.Rows != 19 || res.Diffs[0].Rebuilt.Rows != 20 {
		t.Fatalf("verify after deleting grp2 seq 7: %+v", res.Diffs)
	}
	if !strings.Contains(report.String(), "grp2: live rows=19") || !strings.Contains(report.String(), "rebuilt rows=20") {
		t.Errorf("report does not name the difference:\n%s", report.String())
	}

	progress := &countingProgress{}
	rr, err := rb.Rebuild(projtest.Ctx(t), replay.RebuildOptions{Projection: projections.ProjectionMessagesMySQL, Tenant: tn, Progress: progress.start})
	if err != nil {
		t.Fatal(err)
	}
	if rr.Events != 63 || len(rr.Tenants) != 1 {
		t.Errorf("rebuild result %+v", rr)
	}
	if progress.added != 63 || progress.finished != 1 {
		t.Errorf("progress: %+v, want 63 events added and one finish", *progress)
	}
	if got := len(m.Page(tn, projtest.GroupTopic(2))); got != 20 {
		t.Errorf("after rebuild grp2 has %d messages, want 20", got)
	}
	res, err = rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn})
	if err != nil || !res.OK() {
		t.Fatalf("verify after rebuild: %+v, %v", res, err)
	}
	c := m.Counts(tn)
	if c.GroupMessages != 60 || c.Deletions != 1 {
		t.Errorf("counts after rebuild %+v", c)
	}
	// All tenants.
	rr, err = rb.Rebuild(projtest.Ctx(t), replay.RebuildOptions{Projection: projections.ProjectionMessagesMySQL})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tr := range rr.Tenants {
		names = append(names, tr.Tenant.String())
	}
	if strings.Join(names, ",") != "bystander,rebuild" || m.Counts(other).GroupMessages != 1 {
		t.Errorf("rebuild of all tenants: %v, bystander counts %+v", names, m.Counts(other))
	}
}

// appendingReader is an event store on which new events appear when the rebuild's first pass has
// read everything, as if they were appended during the rebuild.
type appendingReader struct {
	*eventstore.Store
	t     testing.TB
	late  []domain.Envelope
	added bool
}

func (r *appendingReader) ReadAll(ctx context.Context, f eventstore.Filter, after int64, limit int) ([]domain.Envelope, error) {
	page, err := r.Store.ReadAll(ctx, f, after, limit)
	if err == nil && len(page) == 0 && !r.added {
		r.added = true
		projtest.AppendAll(r.t, r.Store, r.late)
	}
	return page, err
}

// TestRebuildCatchesUpAndKeepsTheSchema rebuilds from pages of 7 events in transactions of 20
// with events appended while the first pass ends: the catch-up applies exactly those, the
// rebuilt tables carry every index of the migrated ones, and a verification finds no difference.
func TestRebuildCatchesUpAndKeepsTheSchema(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	tn := m.Tenant("catchup")
	other := m.Tenant("untouched")
	store := projtest.NewEventStoreWith(t, h.Pool, eventstore.Config{MaxRead: 7})
	var history []domain.Envelope
	for seq := int64(1); seq <= 40; seq++ {
		history = append(history, projtest.SentEvent(tn, projtest.GroupTopic(seq%3+1), seq, domain.UserID(seq%4+1), "m"))
	}
	history = append(history, projtest.RecallEvent(tn, projtest.GroupTopic(2), 1, 2, 1), projtest.EditEvent(tn, projtest.GroupTopic(3), 2, 3, 2, "edited"))
	projtest.AppendAll(t, store, history)
	late := []domain.Envelope{projtest.SentEvent(tn, projtest.GroupTopic(1), 41, 1, "late"), projtest.RecallEvent(tn, projtest.GroupTopic(1), 41, 1, 1)}
	reader := &appendingReader{Store: store, t: t, late: late}
	rb, err := replay.NewMessageRebuilder(m.Store, reader, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	res, err := rb.Rebuild(projtest.Ctx(t), replay.RebuildOptions{Projection: projections.ProjectionMessagesMySQL, Tenant: tn, BatchSize: 20})
	if err != nil {
		t.Fatal(err)
	}
	if tr := res.Tenants[0]; tr.Events != 42 || tr.Applied != 44 {
		t.Errorf("rebuild read %d and applied %d events, want 42 and 44 (2 in the catch-up)", tr.Events, tr.Applied)
	}
	msgs := m.Page(tn, projtest.GroupTopic(1))
	if len(msgs) != 14 || msgs[13].Seq != 41 || msgs[13].Status != readmodels.StatusRecalled {
		t.Fatalf("grp1 after the catch-up: %d messages, last %+v", len(msgs), msgs[len(msgs)-1])
	}
	tdb, err := m.Router.DB(projtest.Ctx(t), tn)
	if err != nil {
		t.Fatal(err)
	}
	odb, err := m.Router.DB(projtest.Ctx(t), other)
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"im_group_messages", "im_messages", "im_read_marks", "im_message_deletions"} {
		if got, want := tableDDL(t, tdb, table), tableDDL(t, odb, table); got != want {
			t.Errorf("rebuilt %s:\n%s\nmigrated:\n%s", table, got, want)
		}
	}
	v, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn, BatchSize: 20})
	if err != nil || !v.OK() || v.Events != 44 {
		t.Fatalf("verify after rebuild: %+v, %v", v, err)
	}
}

// tableDDL is SHOW CREATE TABLE without the AUTO_INCREMENT counter.
func tableDDL(t testing.TB, db *sql.DB, table string) string {
	t.Helper()
	var name, ddl string
	if err := db.QueryRowContext(projtest.Ctx(t), "SHOW CREATE TABLE `"+table+"`").Scan(&name, &ddl); err != nil {
		t.Fatal(err)
	}
	return regexp.MustCompile(` AUTO_INCREMENT=\d+`).ReplaceAllString(ddl, "")
}

// TestVerifyFindsEveryAlteredColumn alters, in a topic each, one column of a live message row
// that the events decide, and checks that Verify names exactly the altered topics.
func TestVerifyFindsEveryAlteredColumn(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	tn := m.Tenant("verifycols")
	store := projtest.NewEventStore(t, h.Pool)
	alter := []string{
		"client_msg_id = 'forged'",
		"msg_type = 'image'",
		"mentioned_user_ids = JSON_ARRAY(9)",
		"mention_all = 1",
		"reply_seqid = 1",
		"root_seqid = 1",
		"file_count = 3",
		"content_size = content_size + 1",
		"has_risk = 1",
		"audit_status = 'reject'",
		"group_id = 99",
	}
	var history []domain.Envelope
	for g := int64(1); g <= int64(len(alter))+1; g++ { // the last topic stays as it is
		for seq := int64(1); seq <= 2; seq++ {
			history = append(history, projtest.SentEvent(tn, projtest.GroupTopic(g), seq, domain.UserID(seq), "m"))
		}
	}
	history = projtest.AppendAll(t, store, history)
	if _, err := m.Store.Apply(projtest.Ctx(t), tn, projections.GroupMessagesMySQL, msgstore.DefaultTables(), history); err != nil {
		t.Fatal(err)
	}
	rb, err := replay.NewMessageRebuilder(m.Store, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	if res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn}); err != nil || !res.OK() {
		t.Fatalf("verify of an intact read model: %+v, %v", res, err)
	}
	db, err := m.Router.DB(projtest.Ctx(t), tn)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i, set := range alter {
		topic := projtest.GroupTopic(int64(i) + 1).String()
		if _, err := db.ExecContext(projtest.Ctx(t), "UPDATE im_group_messages SET "+set+" WHERE topic = ? AND seqid = 2", topic); err != nil {
			t.Fatalf("%s: %v", set, err)
		}
		want[topic] = set
	}
	res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range res.Diffs {
		if _, ok := want[d.Part]; !ok {
			t.Errorf("%s differs although untouched: %s", d.Part, d)
		}
		delete(want, d.Part)
	}
	for topic, set := range want {
		t.Errorf("verify after SET %s in %s: no difference reported", set, topic)
	}
}

// A rebuild of every tenant that finds no tenant database (a database template that names none,
// or nothing provisioned yet) fails with ErrNoTenants, for every projection, rather than report
// zero tenants rebuilt as a success.
func TestRebuildOfEveryTenantFindsNone(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	store := projtest.NewEventStore(t, h.Pool)
	rb, err := replay.NewMessageRebuilder(m.Store, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	hotRb, err := replay.NewHotRebuilder(projtest.NewHot(t), store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	biz, err := replay.NewBusinessRebuilder(m.BusinessStore(t), store, m.Router, nil)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := sessions.NewStore(m.Router)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := replay.NewSessionsRebuilder(ss, store, m.Router, nil)
	if err != nil {
		t.Fatal(err)
	}
	for projection, rebuild := range map[string]func(context.Context, replay.RebuildOptions) (replay.RebuildResult, error){
		projections.ProjectionMessagesMySQL: rb.Rebuild, projections.ProjectionMessagesHot: hotRb.Rebuild,
		projections.ProjectionBusinessMySQL: biz.Rebuild, projections.ProjectionSessionsMySQL: sess.Rebuild,
	} {
		res, err := rebuild(projtest.Ctx(t), replay.RebuildOptions{Projection: projection})
		if !errors.Is(err, replay.ErrNoTenants) || len(res.Tenants) != 0 {
			t.Errorf("%s: rebuild of every tenant with none provisioned: %+v, %v; want ErrNoTenants", projection, res, err)
		}
	}
}
