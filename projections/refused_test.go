package projections_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels"
	"github.com/imledger/imledger/replay"
)

// withContent returns env, a sent or edited event, with the content of its payload replaced by
// raw as it is: content an older build or another writer could have stored, which the domain
// refuses today. The envelope is built around the bytes, so no check of the domain sees them.
func withContent(t testing.TB, env domain.Envelope, raw string) domain.Envelope {
	t.Helper()
	var p map[string]json.RawMessage
	if err := json.Unmarshal(env.Payload, &p); err != nil {
		t.Fatal(err)
	}
	p["content"] = json.RawMessage(raw)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	env.Payload = b
	return env
}

// deepJSON is an array nested depth levels deep; MariaDB's JSON columns refuse more than 32.
func deepJSON(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }

// TestRefusedContentDoesNotStopItsConversation stores, bypassing the domain, a message whose
// content MariaDB refuses (40 levels deep) and an edit to such content, among the messages of a
// conversation, and publishes them as the relay would. The 20 messages after the bad one reach
// MySQL, the bad one is a placeholder in the history, nothing is dead-lettered or parked, and a
// verify and a full rebuild of the tenant from the event store agree with the live tables.
func TestRefusedContentDoesNotStopItsConversation(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	tn := m.Tenant("refused")
	store := projtest.NewEventStore(t, h.Pool)
	g := projtest.GroupTopic(1)
	d, err := domain.DirectTopic(3, 4)
	if err != nil {
		t.Fatal(err)
	}
	var history []domain.Envelope
	history = append(history, projtest.SentEvent(tn, g, 1, 3, "before"), withContent(t, projtest.SentEvent(tn, g, 2, 3, ""), deepJSON(40)))
	for seq := int64(3); seq <= 22; seq++ {
		history = append(history, projtest.SentEvent(tn, g, seq, domain.UserID(3+seq%2), fmt.Sprintf("after %d", seq)))
	}
	history = append(history,
		withContent(t, projtest.EditEvent(tn, g, 3, 4, 2, ""), deepJSON(64)),
		projtest.RecallEvent(tn, g, 4, 3, 1),
		projtest.SentEvent(tn, d, 1, 3, "direct"),
		withContent(t, projtest.SentEvent(tn, d, 2, 4, ""), deepJSON(33)),
		projtest.SentEvent(tn, d, 3, 3, "direct after"))
	history = projtest.AppendAll(t, store, history)

	proj := projections.MessagesMySQL(m.Store, "")
	p, _ := h.Run(h.Config(), proj)
	h.Publish(history...)
	projtest.Eventually(t, 40*time.Second, func() error {
		if got := projtest.Seqs(m.Page(tn, g)); len(got) != 22 {
			return fmt.Errorf("group conversation holds seqs %v, want 1-22", got)
		}
		if msgs := m.Page(tn, g); !msgs[2].Blocked() || !msgs[3].Recalled() {
			return fmt.Errorf("seq 3 %+v, seq 4 %+v: the edit and the recall are not applied yet", msgs[2], msgs[3])
		}
		if got := projtest.Seqs(m.Page(tn, d)); len(got) != 3 {
			return fmt.Errorf("direct conversation holds seqs %v, want 1-3", got)
		}
		return nil
	})
	msgs := m.Page(tn, g)
	for i, msg := range msgs {
		switch msg.Seq {
		case 2, 3:
			if msg.Status != readmodels.StatusBlocked || msg.Content != nil || msg.From == 0 || msg.SentAt.IsZero() {
				t.Errorf("seq %d: %+v, want a blocked placeholder", msg.Seq, msg)
			}
		case 4:
		default:
			if msg.Status != readmodels.StatusNormal || msg.Content == nil || msg.Seq != int64(i+1) {
				t.Errorf("seq %d: %+v", msg.Seq, msg)
			}
		}
	}
	if msgs[2].Version != 2 {
		t.Errorf("seq 3 after an edit to refused content has version %d, want 2", msgs[2].Version)
	}
	if dm := m.Page(tn, d); !dm[1].Blocked() || dm[1].Content != nil || string(dm[2].Content) != `"direct after"` {
		t.Errorf("direct conversation: %+v", dm)
	}
	ops := projections.NewDeadLetters(h.Pool, projections.ParkingConfig{}, projtest.Logger(), proj)
	if list, err := ops.ListDeadLetters(projtest.Ctx(t), projections.ListFilter{}); err != nil || len(list) != 0 {
		t.Errorf("dead letters %+v, %v; want none", list, err)
	}
	if n := p.Metrics().Parked(projections.GroupMessagesMySQL); n != 0 {
		t.Errorf("parked metric %v", n)
	}

	rb, err := replay.NewMessageRebuilder(m.Store, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	var report strings.Builder
	res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn, Out: &report})
	if err != nil || !res.OK() || res.Parts != 2 {
		t.Fatalf("verify: %+v, %v\n%s", res, err, report.String())
	}
	rr, err := rb.Rebuild(projtest.Ctx(t), replay.RebuildOptions{Projection: projections.ProjectionMessagesMySQL, Tenant: tn})
	if err != nil || rr.Events != int64(len(history)) {
		t.Fatalf("rebuild: %+v, %v", rr, err)
	}
	if after := m.Page(tn, g); fmt.Sprint(after) != fmt.Sprint(msgs) {
		t.Errorf("the rebuilt history differs:\n%+v\n%+v", after, msgs)
	}
}
