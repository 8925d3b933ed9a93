package projtest

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/migrations"
	"github.com/imledger/imledger/readmodels/hot"
)

// NewEventStore migrates the harness's Postgres database and returns an event store on it.
func NewEventStore(t testing.TB, pool *pgxpool.Pool) *eventstore.Store {
	t.Helper()
	return NewEventStoreWith(t, pool, eventstore.Config{})
}

// NewEventStoreWith is newEventStore with cfg.
func NewEventStoreWith(t testing.TB, pool *pgxpool.Pool, cfg eventstore.Config) *eventstore.Store {
	t.Helper()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := migrations.UpPostgres(Ctx(t), db); err != nil {
		t.Fatal(err)
	}
	s, err := eventstore.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// AppendAll stores events (any streams, exact versions) and returns them with positions.
func AppendAll(t testing.TB, s *eventstore.Store, events []domain.Envelope) []domain.Envelope {
	t.Helper()
	out := make([]domain.Envelope, 0, len(events))
	for start := 0; start < len(events); start += 1000 {
		chunk := events[start:min(start+1000, len(events))]
		res, err := s.AppendBatch(Ctx(t), chunk)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Status != eventstore.Appended {
				t.Fatalf("append %s: %s", chunk[i].EventID, r.Status)
			}
			e := chunk[i]
			e.Position = r.Position
			out = append(out, e)
		}
	}
	return out
}

// NewHot is a hot store under a Redis key prefix of t's own.
func NewHot(t testing.TB) *hot.Store {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	s, err := hot.NewStore(rdb, hot.Config{Prefix: prefix}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// HotRange is the hot messages 1..to of topic.
func HotRange(t testing.TB, s *hot.Store, tn domain.TenantID, topic domain.Topic, to int64) []hot.Message {
	t.Helper()
	msgs, _, err := s.Range(Ctx(t), tn, topic, 1, to)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}
