package projections

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// gatedRecorder is a CheckedApplier that keeps what it applied: ApplyIf applies only when ok
// passes, as a transaction that commits after ok would.
type gatedRecorder struct {
	mu      sync.Mutex
	calls   []string // "ApplyIf n" or "Apply n"
	applied []domain.Envelope
}

func (g *gatedRecorder) Apply(_ context.Context, _ domain.TenantID, events []domain.Envelope) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.calls = append(g.calls, "Apply "+strconv.Itoa(len(events)))
	g.applied = append(g.applied, events...)
	return len(events), nil
}

func (g *gatedRecorder) ApplyIf(ctx context.Context, _ domain.TenantID, events []domain.Envelope, ok func(context.Context) error) (int, error) {
	g.mu.Lock()
	g.calls = append(g.calls, "ApplyIf "+strconv.Itoa(len(events)))
	g.mu.Unlock()
	if err := ok(ctx); err != nil {
		return 0, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.applied = append(g.applied, events...)
	return len(events), nil
}

func flushItems(t *testing.T, tenant domain.TenantID, topics ...string) ([]*batchItem, []domain.Envelope) {
	t.Helper()
	var items []*batchItem
	var events []domain.Envelope
	for i, topic := range topics {
		content, _ := json.Marshal("m")
		env, err := domain.NewEnvelope(tenant, topic, 1, domain.EventGroupMessageSent, domain.Actor{Type: domain.ActorUser, ID: "1"},
			domain.MessageSent{Topic: topic, Seq: 1, From: 1, Content: content, SentAt: time.Now().UTC()})
		if err != nil {
			t.Fatal(err)
		}
		payload, _ := json.Marshal(env)
		e := envelope{Envelope: env, src: source{Topic: "t", Partition: int32(i), Offset: 1}, payload: payload}
		items = append(items, &batchItem{env: e, key: e.key(), done: make(chan result, 1)})
		events = append(events, env)
	}
	return items, events
}

// With a CheckedApplier, a batch is written while its conversations are looked up: a clean batch
// takes one ApplyIf; a batch with a parked conversation is refused, then that conversation's
// event is parked and the rest applied.
func TestFlushChecksParkingWhileWriting(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if err := EnsureSchema(ctx, pool); err != nil {
		t.Fatal(err)
	}
	metrics, _ := NewMetrics(nil)
	rec := &gatedRecorder{}
	p := Projection{Name: "test", ConsumerGroup: "g", Topics: []string{"x"}, Accept: isMessageEvent, Applier: rec}
	r := newRunner(p, Config{Batch: BatchConfig{MaxEvents: 10, Flushers: 1}}, parkingStore{pool: pool}, metrics,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	tenant := domain.MustTenantID("acme")

	items, events := flushItems(t, tenant, "grp1", "grp2")
	r.flush(ctx, items)
	for _, it := range items {
		if res := it.res; res.err != nil {
			t.Fatal(res.err)
		}
	}
	if len(rec.calls) != 1 || rec.calls[0] != "ApplyIf 2" || len(rec.applied) != 2 {
		t.Fatalf("clean batch: calls %v, applied %d", rec.calls, len(rec.applied))
	}

	r.opened.invalidate() // as the dead-letter sink does before it records one
	if _, _, err := r.parking.recordDeadLetter(ctx, DeadLetter{ConsumerGroup: "g", TenantID: tenant.String(),
		ConversationKey: domain.ConversationKey(events[0].StreamID), EventID: "earlier", Reason: ReasonBadEvent, Payload: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	rec.calls, rec.applied = nil, nil
	items, events = flushItems(t, tenant, "grp1", "grp2", "grp3")
	r.flush(ctx, items)
	for _, it := range items {
		if res := it.res; res.err != nil {
			t.Fatal(res.err)
		}
	}
	if got := rec.calls; len(got) != 2 || got[0] != "ApplyIf 3" || got[1] != "Apply 2" {
		t.Fatalf("batch with a parked conversation: calls %v", got)
	}
	for _, e := range rec.applied {
		if e.EventID == events[0].EventID {
			t.Fatal("the parked conversation's event was applied")
		}
	}
	var parked int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM projection_parked_events WHERE event_id = $1", events[0].EventID.String()).Scan(&parked); err != nil || parked != 1 {
		t.Fatalf("parked rows of grp1's event: %d, %v", parked, err)
	}

	// A batch that fails for another reason is not failed event by event before the park
	// check has spoken: the parked conversation's event is parked, not failed.
	rec.calls, rec.applied = nil, nil
	boom := errors.New("bad row")
	r.p.Applier = FailOn(rec, func(e domain.Envelope) error {
		if e.StreamID == "grp3" {
			return boom
		}
		return nil
	})
	items, _ = flushItems(t, tenant, "grp1", "grp3")
	r.flush(ctx, items)
	if res := items[0].res; res.err != nil {
		t.Fatalf("event of the parked conversation: %v", res.err)
	}
	if res := items[1].res; !errors.Is(res.err, boom) {
		t.Fatalf("failing event: %v", res.err)
	}
	if len(rec.applied) != 0 {
		t.Fatalf("applied %d events", len(rec.applied))
	}
}
