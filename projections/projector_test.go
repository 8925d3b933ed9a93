package projections_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/projections"
)

func recorderProjection(group string, a projections.Applier) projections.Projection {
	return projections.Projection{
		Name:          "recorder",
		ConsumerGroup: group,
		Topics:        []string{tkafka.TopicGroupMessagePersist, tkafka.TopicMessagePersist},
		Accept:        func(domain.EventType) bool { return true },
		Applier:       a,
	}
}

// TestProjectorKeepsConversationOrder publishes several conversations interleaved and checks
// that each is applied completely, once, in publish order, and that the lag drops to zero.
func TestProjectorKeepsConversationOrder(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	tenant := domain.MustTenantID(testenv.UniqueName("t"))
	rec := newRecorder()
	p, reg := h.Run(h.Config(), recorderProjection("test.order.v1", rec))

	want := map[string][]string{}
	var all []domain.Envelope
	for seq := int64(1); seq <= 30; seq++ {
		for g := int64(1); g <= 8; g++ {
			e := projtest.SentEvent(tenant, projtest.GroupTopic(g), seq, 7, "hi")
			all = append(all, e)
			want[e.StreamID] = append(want[e.StreamID], e.EventID.String())
		}
	}
	h.Publish(all...)
	h.Publish(all[:50]...) // redelivered duplicates
	projtest.Eventually(t, 30*time.Second, func() error {
		if n := rec.count(); n != len(all) {
			return fmt.Errorf("applied %d of %d", n, len(all))
		}
		return nil
	})
	for conv, w := range want {
		if got := rec.conv(tenant, conv); !reflect.DeepEqual(got, w) {
			t.Errorf("conversation %s applied out of order or incompletely:\n got %v\nwant %v", conv, got, w)
		}
	}
	projtest.Eventually(t, 20*time.Second, func() error {
		lags, err := p.Lag(projtest.Ctx(t))
		if err != nil {
			return err
		}
		if lags[0].Events != 0 {
			return fmt.Errorf("lag %d events", lags[0].Events)
		}
		return nil
	})
	if got := p.Metrics().Applied("test.order.v1"); got != float64(len(all)) {
		t.Errorf("events applied metric = %v, want %d", got, len(all))
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range families {
		if f.GetName() == "imledger_projection_lag_events" && len(f.GetMetric()) == 1 {
			found = f.GetMetric()[0].GetGauge().GetValue() == 0
		}
	}
	if !found {
		t.Errorf("no imledger_projection_lag_events gauge at 0 in %v", families)
	}
}

// TestPoisonedEventParksItsConversation fails one event on purpose: it must land on the
// dead-letter topic with its reason, the rest of its conversation must wait in Postgres, other
// conversations must keep flowing, and a replay must apply the conversation in order.
func TestPoisonedEventParksItsConversation(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	tenant := domain.MustTenantID(testenv.UniqueName("t"))
	a, b := projtest.GroupTopic(1), projtest.GroupTopic(2)
	var aEvents, bEvents []domain.Envelope
	for seq := int64(1); seq <= 5; seq++ {
		aEvents = append(aEvents, projtest.SentEvent(tenant, a, seq, 7, "a"))
		bEvents = append(bEvents, projtest.SentEvent(tenant, b, seq, 7, "b"))
	}
	poison := aEvents[2].EventID
	var failing atomic.Bool
	failing.Store(true)
	rec := newRecorder()
	applier := projections.FailOn(rec, func(e domain.Envelope) error {
		if failing.Load() && e.EventID == poison {
			return errors.New("simulated bad row")
		}
		return nil
	})
	proj := recorderProjection("test.poison.v1", applier)
	p, _ := h.Run(h.Config(), proj)

	for i := range aEvents {
		h.Publish(aEvents[i], bEvents[i])
	}
	projtest.Eventually(t, 30*time.Second, func() error {
		if got := rec.conv(tenant, b.String()); len(got) != 5 {
			return fmt.Errorf("conversation b applied %d of 5", len(got))
		}
		return nil
	})
	ops := projections.NewDeadLetters(h.Pool, projections.ParkingConfig{}, projtest.Logger(), proj)
	var dl projections.DeadLetter
	projtest.Eventually(t, 20*time.Second, func() error {
		list, err := ops.ListDeadLetters(projtest.Ctx(t), projections.ListFilter{Status: projections.StatusOpen})
		if err != nil {
			return err
		}
		if len(list) != 1 || list[0].Parked != 2 {
			return fmt.Errorf("open dead letters %+v, want one with 2 parked events", list)
		}
		dl = list[0]
		return nil
	})
	if dl.EventID != poison.String() || dl.Reason != projections.ReasonRetriesExhausted || dl.ConversationKey != a.String() ||
		dl.TenantID != tenant.String() || !strings.Contains(dl.Error, "simulated bad row") {
		t.Errorf("dead letter = %+v", dl)
	}
	if got, want := rec.conv(tenant, a.String()), projtest.IDs(aEvents[:2]...); !reflect.DeepEqual(got, want) {
		t.Fatalf("conversation a before replay = %v, want only the first two %v", got, want)
	}
	recs := h.DeadLetterRecords(1)
	if len(recs) != 1 {
		t.Fatalf("dead-letter topic has %d records, want 1", len(recs))
	}
	hd := headers(recs[0])
	if hd["reason"] != projections.ReasonRetriesExhausted || hd["consumer_group"] != "test.poison.v1" ||
		hd["event_id"] != poison.String() || hd["original_topic"] != h.Kafka.Topic(tkafka.TopicGroupMessagePersist) ||
		hd["original_offset"] == "" || hd["original_partition"] == "" || !strings.Contains(hd["error"], "simulated bad row") {
		t.Errorf("dead-letter headers = %v", hd)
	}
	if string(recs[0].Key) != tenant.String()+":"+a.String() {
		t.Errorf("dead-letter key = %q", recs[0].Key)
	}
	projtest.Eventually(t, 5*time.Second, func() error { // counted after the row is written
		if got := p.Metrics().DeadLetters("test.poison.v1", projections.ReasonRetriesExhausted); got != 1 {
			return fmt.Errorf("dead letters metric = %v", got)
		}
		return nil
	})
	if got := p.Metrics().Retries("test.poison.v1"); got < 2 {
		t.Errorf("retries metric = %v, want >= 2", got)
	}

	failing.Store(false)
	res, err := ops.ReplayDeadLetter(projtest.Ctx(t), dl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Drained != 2 || res.Reparked != nil || res.DeadLetter.Status != projections.StatusReplayed || res.DeadLetter.ReplayEventID == nil {
		t.Errorf("replay result = %+v", res)
	}
	if got, want := rec.conv(tenant, a.String()), projtest.IDs(aEvents...); !reflect.DeepEqual(got, want) {
		t.Fatalf("conversation a after replay = %v, want %v", got, want)
	}
	if _, err := ops.ReplayDeadLetter(projtest.Ctx(t), dl.ID); !errors.Is(err, projections.ErrDeadLetterResolved) {
		t.Errorf("second replay: %v, want ErrDeadLetterResolved", err)
	}
	// The conversation flows again.
	next := projtest.SentEvent(tenant, a, 6, 7, "a")
	h.Publish(next)
	projtest.Eventually(t, 20*time.Second, func() error {
		if got := rec.conv(tenant, a.String()); len(got) != 6 {
			return fmt.Errorf("conversation a has %d events, want 6", len(got))
		}
		return nil
	})
}

// TestUndecodableRecordIsDeadLetteredAtOnce checks that a record that is not an envelope is
// dead-lettered without retries under the conversation of its Kafka key, which parks that
// conversation, while other conversations keep flowing.
func TestUndecodableRecordIsDeadLetteredAtOnce(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	tenant := domain.MustTenantID(testenv.UniqueName("t"))
	rec := newRecorder()
	p, _ := h.Run(h.Config(), recorderProjection("test.garbage.v1", rec))
	same := projtest.SentEvent(tenant, projtest.GroupTopic(3), 2, 7, "x")
	other := projtest.SentEvent(tenant, projtest.GroupTopic(5), 1, 7, "y")
	bad := projtest.Record(h.Kafka.Topic(tkafka.TopicGroupMessagePersist), projtest.SentEvent(tenant, projtest.GroupTopic(3), 1, 7, "x"))
	bad.Value = stringEncoder("{not json")
	if _, _, err := h.Producer.SendMessage(bad); err != nil {
		t.Fatal(err)
	}
	h.Publish(same, other)
	projtest.Eventually(t, 20*time.Second, func() error {
		if got := rec.conv(tenant, "grp5"); len(got) != 1 {
			return errors.New("other conversation not applied")
		}
		if got := p.Metrics().Parked("test.garbage.v1"); got != 1 {
			return fmt.Errorf("parked = %v, want 1", got)
		}
		return nil
	})
	if got := rec.conv(tenant, "grp3"); len(got) != 0 {
		t.Errorf("grp3 applied %v behind an undecodable record", got)
	}
	recs := h.DeadLetterRecords(1)
	if len(recs) != 1 || headers(recs[0])["reason"] != projections.ReasonBadEnvelope || string(recs[0].Value) != "{not json" {
		t.Fatalf("dead-letter records = %v", recs)
	}
	if got := p.Metrics().Retries("test.garbage.v1"); got != 0 {
		t.Errorf("retries = %v, want 0 for a permanent failure", got)
	}
	// An event type this build does not know is dead-lettered too, not dropped.
	future := projtest.SentEvent(tenant, projtest.GroupTopic(6), 1, 7, "z")
	future.EventType = "message.group.sent.v9"
	if _, _, err := h.Producer.SendMessage(projtest.Record(h.Kafka.Topic(tkafka.TopicGroupMessagePersist), future)); err != nil {
		t.Fatal(err)
	}
	byReason := map[string]string{}
	for _, r := range h.DeadLetterRecords(2) {
		byReason[headers(r)["reason"]] = headers(r)["event_id"]
	}
	if byReason[projections.ReasonUnknownEventType] != future.EventID.String() {
		t.Fatalf("dead letters by reason %v, want %s for the unknown type", byReason, future.EventID)
	}
	// Skipping the record releases the conversation.
	ops := projections.NewDeadLetters(h.Pool, projections.ParkingConfig{}, projtest.Logger(), recorderProjection("test.garbage.v1", rec))
	// The Kafka record is published before the Postgres row is written.
	var list []projections.DeadLetter
	projtest.Eventually(t, 10*time.Second, func() error {
		var err error
		list, err = ops.ListDeadLetters(projtest.Ctx(t), projections.ListFilter{ConsumerGroup: "test.garbage.v1", TenantID: tenant.String()})
		if err != nil || len(list) != 2 || list[0].ConversationKey != "grp3" || list[0].TenantID != tenant.String() {
			return fmt.Errorf("dead letters = %+v, %v", list, err)
		}
		return nil
	})
	if _, err := ops.ReplayDeadLetter(projtest.Ctx(t), list[0].ID); err == nil {
		t.Error("replay of an undecodable record succeeded")
	}
	res, err := ops.SkipDeadLetter(projtest.Ctx(t), list[0].ID)
	if err != nil || res.Drained != 1 || res.DeadLetter.Status != projections.StatusSkipped {
		t.Fatalf("skip = %+v, %v", res, err)
	}
	if got := rec.conv(tenant, "grp3"); !reflect.DeepEqual(got, projtest.IDs(same)) {
		t.Errorf("grp3 after skip = %v", got)
	}
}

// TestPanicIsRetriedThenDeadLettered checks the middleware order: Recoverer inside Retry inside
// PoisonQueue, so a panicking applier is retried and then dead-lettered, not crashed or looped.
func TestPanicIsRetriedThenDeadLettered(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	tenant := domain.MustTenantID(testenv.UniqueName("t"))
	boom := projtest.SentEvent(tenant, projtest.GroupTopic(4), 1, 7, "boom")
	var attempts atomic.Int32
	rec := newRecorder()
	applier := projections.ApplierFunc(func(ctx context.Context, tn domain.TenantID, events []domain.Envelope) (int, error) {
		for _, e := range events {
			if e.EventID == boom.EventID {
				attempts.Add(1)
				panic("applier bug")
			}
		}
		return rec.Apply(ctx, tn, events)
	})
	cfg := h.Config()
	p, _ := h.Run(cfg, recorderProjection("test.panic.v1", applier))
	h.Publish(boom)
	recs := h.DeadLetterRecords(1)
	if len(recs) != 1 || !strings.Contains(headers(recs[0])["error"], "applier bug") {
		t.Fatalf("dead-letter records = %v", recs)
	}
	if got := attempts.Load(); got != int32(cfg.Retry.MaxRetries+1) {
		t.Errorf("attempts = %d, want %d (first try + retries)", got, cfg.Retry.MaxRetries+1)
	}
	if got := p.Metrics().Retries("test.panic.v1"); got != float64(cfg.Retry.MaxRetries) {
		t.Errorf("retries metric = %v, want %d", got, cfg.Retry.MaxRetries)
	}
}
