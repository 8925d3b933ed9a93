package projections_test

import (
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/projections"
)

// futureType is an event type no build knows yet, as a newer writer would publish it.
const futureType domain.EventType = "message.group.sent.v9"

// publishGroup sends envs, of any event type, to the group-message topic in order.
func publishGroup(t testing.TB, h *projtest.Harness, envs ...domain.Envelope) {
	t.Helper()
	msgs := make([]*sarama.ProducerMessage, len(envs))
	for i, e := range envs {
		msgs[i] = projtest.Record(h.Kafka.Topic(tkafka.TopicGroupMessagePersist), e)
	}
	if err := h.Producer.SendMessages(msgs); err != nil {
		t.Fatal(err)
	}
}

// openDeadLetters waits until the open dead letters of tenant and the events parked behind them
// add up to want(), and returns them.
func openDeadLetters(t *testing.T, ops *projections.DeadLetters, tenant domain.TenantID, want func() int) []projections.DeadLetter {
	t.Helper()
	var list []projections.DeadLetter
	projtest.Eventually(t, 30*time.Second, func() error {
		var err error
		list, err = ops.ListDeadLetters(projtest.Ctx(t), projections.ListFilter{TenantID: tenant.String(), Status: projections.StatusOpen})
		if err != nil {
			return err
		}
		n := 0
		for _, d := range list {
			n += 1 + d.Parked
		}
		if w := want(); n != w {
			return fmt.Errorf("open dead letters %+v hold %d events, want %d", list, n, w)
		}
		return nil
	})
	return list
}

func logDeadLetters(t *testing.T, list []projections.DeadLetter) {
	t.Helper()
	for _, d := range list {
		t.Logf("dead letter %d: event %s (%s), %s, %s, %d parked", d.ID, d.EventID, d.EventType, d.Reason, d.Status, d.Parked)
	}
}

// TestUnknownEventTypeWaitsForEarlierEvents keeps an event in flight (its store unreachable for a
// second) while the next event of its conversation, of a type this build does not know, arrives:
// the earlier event must be applied first and only the later ones wait behind the dead letter.
func TestUnknownEventTypeWaitsForEarlierEvents(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	tenant := domain.MustTenantID(testenv.UniqueName("t"))
	a := projtest.GroupTopic(1)
	first, future, after := projtest.SentEvent(tenant, a, 1, 7, "first"), projtest.SentEvent(tenant, a, 2, 7, "from a newer build"),
		projtest.SentEvent(tenant, a, 3, 7, "after it")
	future.EventType = futureType
	var since atomic.Int64 // when first was tried first, in Unix nanoseconds
	rec := newRecorder()
	proj := recorderProjection("test.unknown-in-flight.v1", projections.FailOn(rec, func(e domain.Envelope) error {
		if e.EventID != first.EventID {
			return nil
		}
		since.CompareAndSwap(0, time.Now().UnixNano())
		if time.Since(time.Unix(0, since.Load())) < time.Second {
			return domain.Retryable("apply", errors.New("store unreachable"))
		}
		return nil
	}))
	h.Run(h.Config(), proj)
	publishGroup(t, h, first, future, after)

	ops := projections.NewDeadLetters(h.Pool, projections.ParkingConfig{}, projtest.Logger(), proj)
	// Each of the three events is applied, dead-lettered or parked.
	list := openDeadLetters(t, ops, tenant, func() int { return 3 - len(rec.conv(tenant, a.String())) })
	if got, want := rec.conv(tenant, a.String()), projtest.IDs(first); !reflect.DeepEqual(got, want) {
		t.Errorf("conversation applied %v, want the event before the unknown one %v", got, want)
	}
	if len(list) != 1 || list[0].EventID != future.EventID.String() || list[0].Reason != projections.ReasonUnknownEventType ||
		list[0].Parked != 1 {
		logDeadLetters(t, list)
		t.Fatalf("%d open dead letters, want the unknown event's with the one after it parked", len(list))
	}
	if _, err := ops.SkipDeadLetter(projtest.Ctx(t), list[0].ID); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.conv(tenant, a.String()), projtest.IDs(first, after); !reflect.DeepEqual(got, want) {
		t.Errorf("conversation after the skip = %v, want %v", got, want)
	}
}

// TestUnknownEventTypeParksBehindAnEarlierDeadLetter sends an event of an unknown type to a
// conversation already parked: it is parked behind the open dead letter with the events after it,
// and a replay that reaches it re-parks it (the events after it stay behind it) rather than
// applying them without it.
func TestUnknownEventTypeParksBehindAnEarlierDeadLetter(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	tenant := domain.MustTenantID(testenv.UniqueName("t"))
	a := projtest.GroupTopic(1)
	bad, future, after := projtest.SentEvent(tenant, a, 1, 7, "bad"), projtest.SentEvent(tenant, a, 2, 7, "from a newer build"),
		projtest.SentEvent(tenant, a, 3, 7, "after it")
	future.EventType = futureType
	var failing atomic.Bool
	failing.Store(true)
	rec := newRecorder()
	proj := recorderProjection("test.unknown-parked.v1", projections.FailOn(rec, func(e domain.Envelope) error {
		if failing.Load() && e.EventID == bad.EventID {
			return errors.New("simulated bad row")
		}
		return nil
	}))
	h.Run(h.Config(), proj)
	publishGroup(t, h, bad)
	ops := projections.NewDeadLetters(h.Pool, projections.ParkingConfig{}, projtest.Logger(), proj)
	openDeadLetters(t, ops, tenant, func() int { return 1 })

	publishGroup(t, h, future, after)
	list := openDeadLetters(t, ops, tenant, func() int { return 3 })
	if len(list) != 1 || list[0].EventID != bad.EventID.String() || list[0].Parked != 2 {
		logDeadLetters(t, list)
		t.Fatalf("%d open dead letters, want the first with the unknown event and the one after it parked", len(list))
	}

	failing.Store(false)
	res, err := ops.ReplayDeadLetter(projtest.Ctx(t), list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Drained != 0 || res.Reparked == nil || res.Reparked.EventID != future.EventID.String() || res.Reparked.Parked != 1 {
		if res.Reparked != nil {
			logDeadLetters(t, []projections.DeadLetter{*res.Reparked})
		}
		t.Fatalf("replay drained %d, re-parked %v; want the unknown event re-parked with the one after it", res.Drained, res.Reparked != nil)
	}
	if got, want := rec.conv(tenant, a.String()), projtest.IDs(bad); !reflect.DeepEqual(got, want) {
		t.Errorf("conversation after the replay = %v, want %v", got, want)
	}
	if _, err := ops.SkipDeadLetter(projtest.Ctx(t), res.Reparked.ID); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.conv(tenant, a.String()), projtest.IDs(bad, after); !reflect.DeepEqual(got, want) {
		t.Errorf("conversation after the skip = %v, want %v", got, want)
	}
}

// TestDrainStopsAtAParkedEventItCannotApply parks four events behind a dead letter and spoils two
// of them as this build would see them: one does not decode, one is of an unknown type. Each
// skip applies the events before the first spoiled one and re-parks it with the events after it;
// none is dropped.
func TestDrainStopsAtAParkedEventItCannotApply(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	tenant := domain.MustTenantID(testenv.UniqueName("t"))
	a := projtest.GroupTopic(1)
	var events []domain.Envelope
	for seq := int64(1); seq <= 5; seq++ {
		events = append(events, projtest.SentEvent(tenant, a, seq, 7, "m"))
	}
	rec := newRecorder()
	proj := recorderProjection("test.drain-spoiled.v1", projections.FailOn(rec, func(e domain.Envelope) error {
		if e.EventID == events[0].EventID {
			return errors.New("simulated bad row")
		}
		return nil
	}))
	// As every read model: events of a type this build does not know are not accepted.
	proj.Accept = func(t domain.EventType) bool { _, ok := domain.LookupEventType(t); return ok }
	h.Run(h.Config(), proj)
	h.Publish(events...)
	ops := projections.NewDeadLetters(h.Pool, projections.ParkingConfig{}, projtest.Logger(), proj)
	list := openDeadLetters(t, ops, tenant, func() int { return 5 })

	ctx := projtest.Ctx(t)
	if _, err := h.Pool.Exec(ctx, `UPDATE projection_parked_events SET payload = 'not an envelope'::bytea
		WHERE event_id = $1`, events[2].EventID.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Pool.Exec(ctx, `UPDATE projection_parked_events
		SET payload = convert_to(replace(convert_from(payload, 'UTF8'), $2, $3), 'UTF8') WHERE event_id = $1`,
		events[3].EventID.String(), string(domain.EventGroupMessageSent), string(futureType)); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		drained  int
		reparked *domain.Envelope // nil: none
		parked   int
		applied  []domain.Envelope
	}{
		{drained: 1, reparked: &events[2], parked: 2, applied: events[1:2]},
		{drained: 0, reparked: &events[3], parked: 1, applied: events[1:2]},
		{drained: 1, applied: []domain.Envelope{events[1], events[4]}},
	}
	id := list[0].ID
	for i, s := range steps {
		res, err := ops.SkipDeadLetter(ctx, id)
		if err != nil {
			t.Fatalf("skip %d: %v", i+1, err)
		}
		if got, want := rec.conv(tenant, a.String()), projtest.IDs(s.applied...); !reflect.DeepEqual(got, want) {
			t.Fatalf("skip %d: conversation applied %v, want %v (drained %d)", i+1, got, want, res.Drained)
		}
		if res.Drained != s.drained {
			t.Errorf("skip %d: drained %d, want %d", i+1, res.Drained, s.drained)
		}
		if s.reparked == nil {
			if res.Reparked != nil {
				logDeadLetters(t, []projections.DeadLetter{*res.Reparked})
				t.Fatalf("skip %d: re-parked an event, want none", i+1)
			}
			continue
		}
		if res.Reparked == nil || res.Reparked.EventID != s.reparked.EventID.String() || res.Reparked.Parked != s.parked {
			if res.Reparked != nil {
				logDeadLetters(t, []projections.DeadLetter{*res.Reparked})
			}
			t.Fatalf("skip %d: re-parked %v, want event %s with %d parked behind it", i+1, res.Reparked != nil, s.reparked.EventID, s.parked)
		}
		id = res.Reparked.ID
	}
}
