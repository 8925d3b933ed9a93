package msgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// Content the domain refuses today but an event written before that could carry, each refused by
// MariaDB's JSON column (error 4025, the CHECK (json_valid(...)) constraint).
var refusedContent = map[string]string{
	"40 levels deep": rmtest.Deep(40),
	"lone surrogate": `"\ud800"`,
}

// audit returns has_risk and audit_status of a group message row.
func (f fixture) audit(ctx context.Context, t *testing.T, table, topic string, seq int64) (bool, string) {
	t.Helper()
	var risk bool
	var status string
	err := f.db(ctx, t).QueryRowContext(ctx, "SELECT has_risk, audit_status FROM `"+table+"` WHERE topic = ? AND seqid = ?", topic, seq).Scan(&risk, &status)
	if err != nil {
		t.Fatal(err)
	}
	return risk, status
}

// TestRefusedContentBecomesAPlaceholder applies batches whose sent events carry content MariaDB
// refuses, among good ones: every message gets its row, the refused ones as placeholders, and a
// batch holding one writes the others all the same.
func TestRefusedContentBecomesAPlaceholder(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	for _, topic := range []string{"grp7", "p2p10_20"} {
		var batch []domain.Envelope
		seq := int64(0)
		refused := map[int64]bool{}
		for name, raw := range refusedContent {
			seq++
			batch = append(batch, rmtest.Sent(t, f.tenant, topic, seq, 10, "before "+name))
			seq++
			batch = append(batch, rmtest.WithContent(t, rmtest.Sent(t, f.tenant, topic, seq, 10, ""), raw))
			refused[seq] = true
		}
		seq++
		batch = append(batch, rmtest.Sent(t, f.tenant, topic, seq, 20, "after"))
		if n := f.apply(ctx, t, batch...); n != len(batch) {
			t.Fatalf("%s: applied %d of %d", topic, n, len(batch))
		}
		msgs := f.page(ctx, t, topic, 0)
		if len(msgs) != int(seq) {
			t.Fatalf("%s: %d messages, want %d", topic, len(msgs), seq)
		}
		for _, m := range msgs {
			if refused[m.Seq] {
				if m.Status != readmodels.StatusBlocked || m.Content != nil || m.Head != nil || m.From != 10 || m.ClientMsgID == "" {
					t.Errorf("%s seq %d: refused content stored as %+v, want a blocked placeholder with its metadata", topic, m.Seq, m)
				}
				if topic == "grp7" {
					if risk, audit := f.audit(ctx, t, f.tables.GroupMessages, topic, m.Seq); !risk || audit != "reject" {
						t.Errorf("%s seq %d: has_risk=%v audit_status=%q, want true, reject", topic, m.Seq, risk, audit)
					}
				}
				continue
			}
			if m.Status != readmodels.StatusNormal || !strings.Contains(text(t, m), "") || m.Content == nil {
				t.Errorf("%s seq %d: %+v, want a normal message", topic, m.Seq, m)
			}
		}
		if topic == "grp7" {
			if risk, audit := f.audit(ctx, t, f.tables.GroupMessages, topic, 1); risk || audit != "pass" {
				t.Errorf("a good message has has_risk=%v audit_status=%q", risk, audit)
			}
		}
		// Redelivery changes nothing.
		f.apply(ctx, t, batch...)
		if again := f.page(ctx, t, topic, 0); fmt.Sprint(again) != fmt.Sprint(msgs) {
			t.Errorf("%s: redelivery changed the messages:\n%+v\n%+v", topic, msgs, again)
		}
	}
}

// TestEditsOfRefusedContent edits a message to content the store refuses, then to good content,
// then recalls it; and recalls a placeholder of a refused send.
func TestEditsOfRefusedContent(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	for _, topic := range []string{"grp7", "p2p10_20"} {
		f.apply(ctx, t, rmtest.Sent(t, f.tenant, topic, 1, 10, "first"),
			rmtest.WithContent(t, rmtest.Sent(t, f.tenant, topic, 2, 10, ""), rmtest.Deep(33)))
		f.apply(ctx, t, rmtest.WithContent(t, rmtest.Edited(t, f.tenant, topic, 1, 10, 2, ""), rmtest.Deep(50)),
			rmtest.Sent(t, f.tenant, topic, 3, 20, "third"))
		m := f.page(ctx, t, topic, 0)[0]
		if m.Status != readmodels.StatusBlocked || m.Content != nil || m.Version != 2 {
			t.Fatalf("%s: after an edit to refused content: %+v", topic, m)
		}
		f.apply(ctx, t, rmtest.Edited(t, f.tenant, topic, 1, 10, 3, "readable again"))
		m = f.page(ctx, t, topic, 0)[0]
		if m.Status != readmodels.StatusNormal || text(t, m) != "readable again" || m.Version != 3 {
			t.Fatalf("%s: after a good edit: %+v", topic, m)
		}
		if topic == "grp7" {
			if risk, audit := f.audit(ctx, t, f.tables.GroupMessages, topic, 1); risk || audit != "pass" {
				t.Errorf("after a good edit: has_risk=%v audit_status=%q", risk, audit)
			}
		}
		f.apply(ctx, t, rmtest.Recalled(t, f.tenant, topic, 1, 10), rmtest.Recalled(t, f.tenant, topic, 2, 10))
		msgs := f.page(ctx, t, topic, 0)
		if len(msgs) != 3 || !msgs[0].Recalled() || !msgs[1].Recalled() || text(t, msgs[2]) != "third" {
			t.Fatalf("%s: after recalls: %+v", topic, msgs)
		}
	}
}

// TestBulkLoadStoresRefusedContentAsApplyDoes loads runs long enough for LOAD DATA with refused
// content in them: the load must not drop the row (LOAD DATA IGNORE skips it with a warning) but
// write the placeholder Apply writes.
func TestBulkLoadStoresRefusedContentAsApplyDoes(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	var batch []domain.Envelope
	for seq := int64(1); seq <= 120; seq++ {
		e := rmtest.Sent(t, f.tenant, "grp7", seq, domain.UserID(1+seq%5), fmt.Sprintf("m%d", seq))
		switch seq {
		case 30:
			e = rmtest.WithContent(t, e, rmtest.Deep(40))
		case 31:
			e = rmtest.WithContent(t, e, `{"a":"\udc00"}`)
		}
		batch = append(batch, e)
	}
	batch = append(batch, rmtest.WithContent(t, rmtest.Edited(t, f.tenant, "grp7", 5, 1, 2, ""), rmtest.Deep(35)))
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
	if len(live) != 120 || strings.Join(live, "\n") != strings.Join(loaded, "\n") {
		t.Fatalf("live %d rows, loaded %d; they differ:\n%s\n----\n%s", len(live), len(loaded), strings.Join(live, "\n"), strings.Join(loaded, "\n"))
	}
	msgs, _, err := f.store.Page(ctx, f.tenant, bl.Tables(), msgstore.PageQuery{Topic: rmtest.Topic(t, "grp7"), Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int64{5, 30, 31} {
		if m := msgs[seq-1]; m.Seq != seq || !m.Blocked() || m.Content != nil {
			t.Errorf("loaded seq %d: %+v, want a blocked placeholder", seq, m)
		}
	}
}

// TestCheckHotRefusesPagesWithBlockedMessages: the hot cache keeps a message's content as sent,
// so a cached page holding a message MySQL stored as a placeholder must be read from MySQL.
func TestCheckHotRefusesPagesWithBlockedMessages(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	f.apply(ctx, t, rmtest.Sent(t, f.tenant, "grp7", 1, 10, "one"),
		rmtest.WithContent(t, rmtest.Sent(t, f.tenant, "grp7", 2, 10, ""), rmtest.Deep(40)),
		rmtest.Sent(t, f.tenant, "grp7", 3, 10, "three"))
	check := msgstore.HotCheck{Topic: rmtest.Topic(t, "grp7"), From: 1, To: 3, Seqs: []int64{1, 2, 3}, Live: []int64{1, 2, 3}}
	res, err := f.store.CheckHot(ctx, f.tenant, f.tables, check)
	if err != nil || res.OK() || res.Recalled != 1 {
		t.Fatalf("a cached page holding the blocked seq 2: %+v, %v; want it refused", res, err)
	}
	check.To, check.Seqs, check.Live = 1, []int64{1}, []int64{1}
	if res, err := f.store.CheckHot(ctx, f.tenant, f.tables, check); err != nil || !res.OK() {
		t.Fatalf("a cached page without it: %+v, %v", res, err)
	}
}
