package group_test

import (
	"testing"
	"time"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
)

// States that age together are confirmed by one query, read no event, and stay fresh past the
// maxAge of their first read: their loads after it neither wait for the store nor read it.
func TestLoaderConfirmsUnchangedStatesInOneQuery(t *testing.T) {
	t.Parallel()
	e := newLoaderEnv(t, group.LoaderConfig{}, 2, 3, 4, 5)
	ctx, tenant, g, cr, l := e.ctx, e.tenant, e.g, e.cr, e.l
	const maxAge = 1600 * time.Millisecond
	users := []domain.UserID{1, 2, 3, 4, 5}
	loaded := time.Now()
	for _, u := range users {
		if m, err := l.Membership(ctx, tenant, g, u, maxAge); err != nil || !m.IsMember() {
			t.Fatalf("first load of %d: member %v, %v", u, m.IsMember(), err)
		}
	}
	reads := cr.reads.Load()
	time.Sleep(time.Until(loaded.Add(maxAge*3/4 + 20*time.Millisecond)))
	for _, u := range users { // every state is aging: each is queued for confirmation
		if _, err := l.Membership(ctx, tenant, g, u, maxAge); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Until(loaded.Add(maxAge + 100*time.Millisecond)))
	for _, u := range users {
		if m, err := l.Membership(ctx, tenant, g, u, maxAge); err != nil || !m.IsMember() {
			t.Fatalf("load of %d after the first read's maxAge: member %v, %v", u, m.IsMember(), err)
		}
	}
	if n := cr.reads.Load() - reads; n != 0 {
		t.Errorf("%d stream reads after the first loads; want none: unchanged states are confirmed without reading", n)
	}
	if n := cr.confirms.Load(); n != 1 {
		t.Errorf("%d confirmation queries for %d states that aged together, want 1", n, len(users))
	}
}

// An invalidation that crosses a confirmation leaves the state stale: the query began before the
// change it announces, so its "nothing new" says nothing of it, and the next load reads.
func TestLoaderConfirmationCrossedByAnInvalidation(t *testing.T) {
	t.Parallel()
	e := newLoaderEnv(t, group.LoaderConfig{}, 2)
	ctx, tenant, g, cr, l := e.ctx, e.tenant, e.g, e.cr, e.l
	const maxAge = 1600 * time.Millisecond
	loaded := time.Now()
	if m, err := l.Membership(ctx, tenant, g, 2, maxAge); err != nil || !m.IsMember() {
		t.Fatalf("first load: member %v, %v", m.IsMember(), err)
	}
	crossed := make(chan struct{})
	cr.confirmHook = func() {
		// Another node removed the member after the query began; its invalidation arrives now.
		l.Invalidate(ctx, tenant, []string{domain.MembershipStreamID(g, 2)})
		close(crossed)
	}
	time.Sleep(time.Until(loaded.Add(maxAge*3/4 + 20*time.Millisecond)))
	if _, err := l.Membership(ctx, tenant, g, 2, maxAge); err != nil {
		t.Fatal(err)
	}
	<-crossed
	time.Sleep(50 * time.Millisecond) // the batch stores its outcome after the query returns
	reads := cr.reads.Load()
	if _, err := l.Membership(ctx, tenant, g, 2, maxAge); err != nil {
		t.Fatal(err)
	}
	if cr.reads.Load() == reads {
		t.Error("a load after an invalidation that crossed the confirmation was answered from the cache")
	}
}
