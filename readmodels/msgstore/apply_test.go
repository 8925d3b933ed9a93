package msgstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
	"github.com/imledger/imledger/readmodels/msgstore"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

const group = "im.readmodel.messages"

type fixture struct {
	router *tenantdb.Router
	store  *msgstore.Store
	tenant domain.TenantID
	tables msgstore.Tables
}

func setup(t *testing.T) (context.Context, fixture) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	r := rmtest.Router(t)
	return ctx, fixture{router: r, store: msgstore.NewStore(r), tenant: rmtest.Tenant(t, r), tables: msgstore.DefaultTables()}
}

// db returns the fixture tenant's database.
func (f fixture) db(ctx context.Context, t *testing.T) *sql.DB {
	t.Helper()
	db, err := f.router.DB(ctx, f.tenant)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func (f fixture) apply(ctx context.Context, t *testing.T, events ...domain.Envelope) int {
	t.Helper()
	n, err := f.store.Apply(ctx, f.tenant, group, f.tables, events)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return n
}

func (f fixture) page(ctx context.Context, t *testing.T, topic string, viewer domain.UserID) []readmodels.Message {
	t.Helper()
	msgs, _, err := f.store.Page(ctx, f.tenant, f.tables, msgstore.PageQuery{Topic: rmtest.Topic(t, topic), Viewer: viewer, Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

func text(t *testing.T, m readmodels.Message) string {
	t.Helper()
	if m.Content == nil {
		return "<nil>"
	}
	var s string
	if err := json.Unmarshal(m.Content, &s); err != nil {
		t.Fatalf("content %s: %v", m.Content, err)
	}
	return s
}

func TestApplySameBatchTwiceWritesOnce(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	var batch []domain.Envelope
	for seq := int64(1); seq <= 5; seq++ {
		batch = append(batch, rmtest.Sent(t, f.tenant, "grp7", seq, 10, "g"), rmtest.Sent(t, f.tenant, "p2p10_20", seq, 10, "d"))
	}
	batch = append(batch, batch[0]) // a repeat inside the batch counts once
	if n := f.apply(ctx, t, batch...); n != 10 {
		t.Fatalf("first apply: %d applied, want 10", n)
	}
	before := fmt.Sprint(f.page(ctx, t, "grp7", 0), f.page(ctx, t, "p2p10_20", 0))
	// Redelivered, and applied by another consumer group: the writes are idempotent.
	f.apply(ctx, t, batch...)
	if n, err := f.store.Apply(ctx, f.tenant, "other", f.tables, batch); err != nil || n != 10 {
		t.Fatalf("other group: %d, %v", n, err)
	}
	if after := fmt.Sprint(f.page(ctx, t, "grp7", 0), f.page(ctx, t, "p2p10_20", 0)); after != before {
		t.Fatalf("applying the batch again changed the messages:\n%s\n%s", before, after)
	}
	c, err := f.store.Counts(ctx, f.tenant, f.tables)
	if err != nil {
		t.Fatal(err)
	}
	want := msgstore.TableCounts{GroupMessages: 5, DirectMessages: 5, ReadMarks: 3}
	if c != want {
		t.Fatalf("counts %+v, want %+v", c, want)
	}
}

func TestRecallThenEditLeavesMessageRecalled(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	for _, topic := range []string{"grp7", "p2p10_20"} {
		f.apply(ctx, t, rmtest.Sent(t, f.tenant, topic, 1, 10, "secret"), rmtest.Sent(t, f.tenant, topic, 2, 20, "keep"))
		f.apply(ctx, t, rmtest.Recalled(t, f.tenant, topic, 1, 10))
		f.apply(ctx, t, rmtest.Edited(t, f.tenant, topic, 1, 10, 2, "edited after recall"))
		f.apply(ctx, t, rmtest.Recalled(t, f.tenant, topic, 1, 10)) // a second recall event changes nothing
		msgs := f.page(ctx, t, topic, 0)
		if len(msgs) != 2 {
			t.Fatalf("%s: %d messages, want 2", topic, len(msgs))
		}
		m := msgs[0]
		if m.Status != readmodels.StatusRecalled || m.Content != nil || m.Head != nil || m.RecalledBy != 10 || m.RecalledAt == nil {
			t.Fatalf("%s: recalled message %+v", topic, m)
		}
		if m.Version != 2 {
			t.Fatalf("%s: version %d after one recall, want 2", topic, m.Version)
		}
		if got := text(t, msgs[1]); got != "keep" {
			t.Fatalf("%s: seq 2 content %q", topic, got)
		}
	}
}

func TestEditsOnlyMoveForward(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	f.apply(ctx, t, rmtest.Sent(t, f.tenant, "grp7", 1, 10, "v1"))
	f.apply(ctx, t, rmtest.Edited(t, f.tenant, "grp7", 1, 10, 3, "v3"))
	f.apply(ctx, t, rmtest.Edited(t, f.tenant, "grp7", 1, 10, 2, "v2 redelivered late"))
	f.apply(ctx, t, rmtest.Sent(t, f.tenant, "grp7", 1, 10, "v1")) // redelivered under a new event id
	m := f.page(ctx, t, "grp7", 0)[0]
	if text(t, m) != "v3" || m.Version != 3 {
		t.Fatalf("after v3, v2, v1: %q version %d", text(t, m), m.Version)
	}
}

func TestRecallOfUnknownMessageRollsBackTheBatch(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	recall := rmtest.Recalled(t, f.tenant, "grp7", 9, 10)
	_, err := f.store.Apply(ctx, f.tenant, group, f.tables, []domain.Envelope{rmtest.Sent(t, f.tenant, "grp7", 1, 10, "x"), recall})
	var ee *msgstore.EventError
	if !errors.As(err, &ee) || ee.EventID != recall.EventID || !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("recall of a missing message: %v", err)
	}
	if c, _ := f.store.Counts(ctx, f.tenant, f.tables); c.GroupMessages != 0 {
		t.Fatalf("batch not rolled back: %+v", c)
	}
}

func TestApplyRejectsEventsOfAnotherTenant(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	other := rmtest.Sent(t, domain.MustTenantID("someone_else"), "grp7", 1, 10, "x")
	if _, err := f.store.Apply(ctx, f.tenant, group, f.tables, []domain.Envelope{other}); !errors.Is(err, domain.ErrInvalid) {
		t.Fatalf("foreign event: %v, want ErrInvalid", err)
	}
	unprovisioned := domain.MustTenantID("rm_never_provisioned")
	ev := rmtest.Sent(t, unprovisioned, "grp7", 1, 10, "x")
	if _, err := f.store.Apply(ctx, unprovisioned, group, f.tables, []domain.Envelope{ev}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unprovisioned tenant: %v, want ErrNotFound", err)
	}
}

func TestReadMarks(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	f.apply(ctx, t,
		rmtest.Sent(t, f.tenant, "p2p10_20", 1, 10, "a"),
		rmtest.Sent(t, f.tenant, "p2p10_20", 2, 10, "b"),
		rmtest.Sent(t, f.tenant, "grp7", 1, 30, "c"),
		rmtest.ReadMarked(t, f.tenant, "grp7", 40, 1, 1),
	)
	f.apply(ctx, t, rmtest.ReadMarked(t, f.tenant, "p2p10_20", 20, 2, 2), rmtest.ReadMarked(t, f.tenant, "p2p10_20", 20, 1, 5))
	cases := []struct {
		user       domain.UserID
		topic      string
		read, recv int64
	}{
		{10, "p2p10_20", 2, 2}, // sender: own messages are read
		{20, "p2p10_20", 2, 5}, // receiver: marks only move forward, each on its own
		{30, "grp7", 1, 1},
		{40, "grp7", 1, 1},
	}
	for _, c := range cases {
		m, found, err := f.store.ReadMarkOf(ctx, f.tenant, f.tables, c.user, rmtest.Topic(t, c.topic))
		if err != nil || !found || m.ReadSeq != c.read || m.RecvSeq != c.recv {
			t.Errorf("user %d %s: %+v found=%v err=%v, want read %d recv %d", c.user, c.topic, m, found, err, c.read, c.recv)
		}
	}
	// The 1:1 receiver has a row before reading anything, so the conversation is in their list.
	f.apply(ctx, t, rmtest.Sent(t, f.tenant, "p2p10_50", 1, 10, "hi"))
	m, found, err := f.store.ReadMarkOf(ctx, f.tenant, f.tables, 50, rmtest.Topic(t, "p2p10_50"))
	if err != nil || !found || m.ReadSeq != 0 {
		t.Fatalf("receiver row: %+v found=%v err=%v", m, found, err)
	}
}

func TestDeleteForMeHidesOnlyForThatUser(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	f.apply(ctx, t, rmtest.Sent(t, f.tenant, "grp7", 1, 10, "a"), rmtest.Sent(t, f.tenant, "grp7", 2, 10, "b"))
	f.apply(ctx, t, rmtest.Deleted(t, f.tenant, "grp7", 1, 20))
	if got := f.page(ctx, t, "grp7", 20); len(got) != 1 || got[0].Seq != 2 {
		t.Fatalf("viewer 20 sees %d messages, want only seq 2", len(got))
	}
	if got := f.page(ctx, t, "grp7", 30); len(got) != 2 {
		t.Fatalf("viewer 30 sees %d messages, want 2", len(got))
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	ctx, a := setup(t)
	b := a
	b.tenant = rmtest.Tenant(t, a.router)
	a.apply(ctx, t, rmtest.Sent(t, a.tenant, "grp7", 1, 10, "tenant a"))
	b.apply(ctx, t, rmtest.Sent(t, b.tenant, "grp7", 1, 10, "tenant b"), rmtest.Sent(t, b.tenant, "grp7", 2, 10, "tenant b"))
	if got := a.page(ctx, t, "grp7", 10); len(got) != 1 || text(t, got[0]) != "tenant a" {
		t.Fatalf("tenant a sees %+v", got)
	}
	if last, _ := a.store.LastSeq(ctx, a.tenant, a.tables, rmtest.Topic(t, "grp7")); last != 1 {
		t.Fatalf("tenant a last seq %d, want 1", last)
	}
}

func TestApplyOverlappingBatchesLeavesOneRowPerMessage(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	var events []domain.Envelope
	for seq := int64(1); seq <= 700; seq++ {
		events = append(events, rmtest.Sent(t, f.tenant, "grp7", seq, domain.UserID(1+seq%3), "m"))
	}
	cases := []struct {
		from, to int
		want     int
	}{
		{0, 3, 3},      // first
		{0, 6, 6},      // overlaps the start
		{350, 400, 50}, // disjoint
		{0, 700, 700},  // larger than one statement
		{0, 700, 700},
	}
	for _, c := range cases {
		if n := f.apply(ctx, t, events[c.from:c.to]...); n != c.want {
			t.Fatalf("apply [%d,%d): %d applied, want %d", c.from, c.to, n, c.want)
		}
	}
	counts, err := f.store.Counts(ctx, f.tenant, f.tables)
	if err != nil {
		t.Fatal(err)
	}
	if counts.GroupMessages != 700 {
		t.Fatalf("counts %+v, want 700 messages", counts)
	}
	if last, _ := f.store.LastSeq(ctx, f.tenant, f.tables, rmtest.Topic(t, "grp7")); last != 700 {
		t.Fatalf("last seq %d", last)
	}
}

func TestApplyIfCommitsOnlyWhenOKPasses(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	batch := []domain.Envelope{rmtest.Sent(t, f.tenant, "grp7", 1, 10, "a"), rmtest.Sent(t, f.tenant, "p2p10_20", 1, 20, "b")}
	veto := errors.New("parked")
	calls := 0
	_, err := f.store.ApplyIf(ctx, f.tenant, group, f.tables, batch, func(context.Context) error { calls++; return veto })
	if err != veto || calls != 1 {
		t.Fatalf("vetoed apply: %v after %d calls; want the veto itself after 1", err, calls)
	}
	if c, _ := f.store.Counts(ctx, f.tenant, f.tables); c != (msgstore.TableCounts{}) {
		t.Fatalf("vetoed batch left rows: %+v", c)
	}
	n, err := f.store.ApplyIf(ctx, f.tenant, group, f.tables, batch, func(context.Context) error { calls++; return nil })
	if err != nil || n != 2 || calls != 2 {
		t.Fatalf("apply after ok: %d, %v, %d calls", n, err, calls)
	}
	if c, _ := f.store.Counts(ctx, f.tenant, f.tables); c.GroupMessages != 1 || c.DirectMessages != 1 {
		t.Fatalf("counts %+v", c)
	}
}
