package eventstore_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// sentAt builds a group message event of topic at seq that occurred at at.
func sentAt(t *testing.T, tenant domain.TenantID, topic string, seq int64, at time.Time) domain.Envelope {
	t.Helper()
	e, err := domain.NewEnvelope(tenant, topic, seq, domain.EventGroupMessageSent, domain.Actor{Type: domain.ActorUser, ID: "1"},
		map[string]any{"topic": topic, "seq": seq})
	if err != nil {
		t.Fatal(err)
	}
	e.OccurredAt = at
	return e
}

// partitionOf returns the table an event is stored in.
func partitionOf(t *testing.T, pool *pgxpool.Pool, id [16]byte) string {
	t.Helper()
	var name string
	if err := pool.QueryRow(testCtx(t), `SELECT tableoid::regclass::text FROM events WHERE event_id = $1`, id).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

// Message events go to the partition of their month (rows written before the month's partition
// existed move into it when it is made); other events to the kept partition. A month is dropped
// only when every tenant in it has a horizon past it and the relay published all of it, and the
// stream keeps its version afterwards. Read marks are kept with the other non-history events.
func TestMonthPartitionsRouteAndDrop(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, pool := newStore(t, eventstore.Config{})
	tenant := domain.MustTenantID("acme")
	old := time.Date(2020, 3, 15, 12, 0, 0, 0, time.UTC)

	early, err := store.AppendBatch(ctx, []domain.Envelope{sentAt(t, tenant, "grp1", 1, old)})
	if err != nil || early[0].Status != eventstore.Appended {
		t.Fatalf("append before the month exists: %+v %v", early, err)
	}
	n, err := store.EnsureMonths(ctx, old, old)
	if err != nil || n != 1 {
		t.Fatalf("EnsureMonths = %d, %v; want 1 created", n, err)
	}
	if n, _ := store.EnsureMonths(ctx, old, old); n != 0 {
		t.Fatalf("EnsureMonths again created %d", n)
	}
	second := sentAt(t, tenant, "grp1", 2, old.Add(time.Hour))
	if _, err := store.Append(ctx, tenant, "grp1", 1, []domain.Envelope{second}); err != nil {
		t.Fatal(err)
	}
	stream, err := store.ReadStream(ctx, tenant, "grp1", 0, 0)
	if err != nil || len(stream) != 2 {
		t.Fatalf("stream: %d events, %v", len(stream), err)
	}
	for _, e := range stream {
		if got := partitionOf(t, pool, e.EventID); got != "events_m202003" {
			t.Errorf("message of March 2020 stored in %s", got)
		}
	}
	other := event(tenant, "group/1", 1, "")
	other.EventType = domain.EventGroupCreated
	if _, err := store.Append(ctx, tenant, "group/1", 0, []domain.Envelope{other}); err != nil {
		t.Fatal(err)
	}
	if got := partitionOf(t, pool, other.EventID); got != "events_kept" {
		t.Errorf("a non-message event stored in %s", got)
	}
	mark := event(tenant, "grp1/read/1", 1, "")
	mark.EventType, mark.OccurredAt = domain.MessageEventType(domain.TopicGroup, domain.ActionReadMarked), old
	if _, err := store.Append(ctx, tenant, "grp1/read/1", 0, []domain.Envelope{mark}); err != nil {
		t.Fatal(err)
	}
	if got := partitionOf(t, pool, mark.EventID); got != "events_kept" {
		t.Errorf("a read mark (state, not history) stored in %s", got)
	}

	parts, err := store.MonthPartitions(ctx)
	if err != nil || len(parts) == 0 || parts[0].Name != "events_m202003" || !parts[0].Month.Equal(time.Date(2020, 3, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("MonthPartitions = %+v, %v", parts, err)
	}
	march := parts[0]
	if err := store.DropMonth(ctx, march, time.Second); !errors.Is(err, eventstore.ErrPartitionKept) {
		t.Fatalf("drop without a horizon: %v, want ErrPartitionKept", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO tenants (tenant_id, status, version, created_at, updated_at, retained_before)
		VALUES ('acme', 'active', 1, now(), now(), '2020-04-01Z')`); err != nil {
		t.Fatal(err)
	}
	if err := store.DropMonth(ctx, march, time.Second); !errors.Is(err, eventstore.ErrPartitionKept) {
		t.Fatalf("drop before the relay published it: %v, want ErrPartitionKept", err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO relay_checkpoints (name, tx_id, position)
		SELECT 'relay', max(tx_id), max(position) FROM events`); err != nil {
		t.Fatal(err)
	}
	if err := store.DropMonth(ctx, march, time.Second); err != nil {
		t.Fatalf("drop an expired, relayed month: %v", err)
	}
	if got, _ := store.ReadStream(ctx, tenant, "grp1", 0, 0); len(got) != 0 {
		t.Errorf("the dropped month's stream still has %d events", len(got))
	}
	if v, err := store.LastVersion(ctx, tenant, "grp1"); err != nil || v != 2 {
		t.Errorf("LastVersion after the drop = %d, %v; want 2 (the seq goes on)", v, err)
	}
	if _, err := store.Append(ctx, tenant, "grp1", 0, []domain.Envelope{sentAt(t, tenant, "grp1", 1, time.Now())}); !errors.Is(err, domain.ErrConcurrency) {
		t.Errorf("append at version 1 after the drop: %v, want ErrConcurrency", err)
	}
	if got, _ := store.ReadStream(ctx, tenant, "group/1", 0, 0); len(got) != 1 {
		t.Errorf("the kept stream lost its event: %d", len(got))
	}
	// A stream's highest version outlives its dropped events: StreamsMoved still tells a cached
	// state at version 1 from one at version 2.
	moved, err := store.StreamsMoved(ctx, []domain.TenantID{tenant, tenant, tenant, tenant, tenant},
		[]string{"grp1", "grp1", "group/1", "group/1", "nosuch"}, []int64{1, 2, 0, 1, 0})
	if want := []bool{true, false, true, false, false}; err != nil || !slices.Equal(moved, want) {
		t.Errorf("StreamsMoved after the drop = %v, %v; want %v", moved, err, want)
	}
}
