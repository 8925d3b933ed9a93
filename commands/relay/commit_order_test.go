package relay_test

import (
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

// A transaction that inserted first but commits last holds the tail back instead of being
// skipped.
func TestRelayHoldsBackLaterCommitsUntilEarlierOnesCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, true)
	tenant := domain.MustTenantID("acme")
	r := e.newRelay(e.fastConfig(), nil)
	start(t, e.ctx, r)
	c := e.collector()

	slow, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(e.ctx)
	a := rawEvent(t, tenant, "grp1", 1, domain.EventGroupMessageSent)
	insertRaw(e.ctx, t, slow, a)
	e.version["acme/grp1"] = 1

	b := e.appendEvents(tenant, "grp2", domain.EventGroupMessageSent, 1, "") // commits now

	c.poll(e.ctx, 500*time.Millisecond)
	if c.seen[b[0].EventID.String()] {
		t.Fatal("an event was relayed while an older transaction was still running; the older one could be skipped")
	}
	if err := slow.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	c.waitFor(e.ctx, append(b, a), 10*time.Second)
	c.checkStreams(e)
}

// A transaction that took its id first but inserted last commits and is relayed first; the
// other, with the lower position, commits afterwards and is still delivered. A relay that
// followed positions alone would skip it.
func TestRelayDeliversEventsCommittedOutOfPositionOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, true)
	tenant := domain.MustTenantID("acme")
	r := e.newRelay(e.fastConfig(), nil)
	start(t, e.ctx, r)
	c := e.collector()

	early, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Rollback(e.ctx)
	if _, err := early.Exec(e.ctx, "SELECT pg_current_xact_id()"); err != nil { // takes the older id
		t.Fatal(err)
	}
	late, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback(e.ctx)
	first := rawEvent(t, tenant, "grp1", 1, domain.EventGroupMessageSent)
	second := rawEvent(t, tenant, "grp2", 1, domain.EventGroupMessageSent)
	posFirst := insertRaw(e.ctx, t, late, first)    // lower position, newer transaction
	posSecond := insertRaw(e.ctx, t, early, second) // higher position, older transaction
	e.version["acme/grp1"], e.version["acme/grp2"] = 1, 1
	if posFirst >= posSecond {
		t.Fatalf("positions %d, %d: want the late transaction's event first", posFirst, posSecond)
	}

	if err := early.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	c.waitFor(e.ctx, []domain.Envelope{second}, 10*time.Second)
	if c.seen[first.EventID.String()] {
		t.Fatal("the uncommitted event was published")
	}
	if err := late.Commit(e.ctx); err != nil {
		t.Fatal(err)
	}
	c.waitFor(e.ctx, []domain.Envelope{first}, 10*time.Second)
	c.checkStreams(e)
	waitUntil(t, 5*time.Second, func() bool { return r.Stats().Cursor.Position == posFirst })
}
