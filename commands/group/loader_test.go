package group_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
)

// countingReader counts reads and returned events, and can hold reads at a gate.
type countingReader struct {
	*eventstore.Store
	reads, events atomic.Int64
	confirms      atomic.Int64 // StreamsMoved queries
	confirmHook   func()       // non-nil: runs inside each StreamsMoved query, before it returns
	mu            sync.Mutex
	gate          chan struct{} // non-nil: reads wait for it to close
	entered       chan struct{} // signalled when a read reaches the gate
}

func (c *countingReader) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gate, c.entered = make(chan struct{}), make(chan struct{}, 16)
}

func (c *countingReader) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.gate)
	c.gate = nil
}

func (c *countingReader) ReadStream(ctx context.Context, tenant domain.TenantID, stream string, after int64, limit int) ([]domain.Envelope, error) {
	c.mu.Lock()
	gate, entered := c.gate, c.entered
	c.mu.Unlock()
	c.reads.Add(1)
	evs, err := c.Store.ReadStream(ctx, tenant, stream, after, limit)
	if gate != nil {
		entered <- struct{}{}
		<-gate
	}
	c.events.Add(int64(len(evs)))
	return evs, err
}

func (c *countingReader) StreamsMoved(ctx context.Context, tenants []domain.TenantID, streams []string, versions []int64) ([]bool, error) {
	c.confirms.Add(1)
	moved, err := c.Store.StreamsMoved(ctx, tenants, streams, versions)
	if c.confirmHook != nil {
		c.confirmHook()
	}
	return moved, err
}

// loaderEnv is a group of acme owned by user 1, the handlers that write it, and a loader over a
// counting reader of the same store: the loader learns of the handlers' commits only by reading.
type loaderEnv struct {
	ctx    context.Context
	tenant domain.TenantID
	h      *group.Handlers
	g      domain.GroupID
	cr     *countingReader
	l      *group.Loader
}

func newLoaderEnv(t *testing.T, cfg group.LoaderConfig, members ...domain.UserID) loaderEnv {
	t.Helper()
	_, store := newStore(t, 4)
	e := loaderEnv{ctx: testCtx(t), tenant: domain.MustTenantID("acme")}
	e.h = newHandlers(t, store, group.Deps{}, group.Config{})
	e.g = createGroup(t, e.h, who(e.tenant, 1), nil)
	if len(members) > 0 {
		join(t, e.h, e.tenant, e.g, members...)
	}
	e.cr = &countingReader{Store: store}
	l, err := group.NewLoader(e.cr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.l = l
	return e
}

// The loader reads a stream once, then only what was appended since; a cached load within
// maxAge costs no read; an invalidation forces the next cached load to read.
func TestLoaderCatchesUpAndCaches(t *testing.T) {
	t.Parallel()
	e := newLoaderEnv(t, group.LoaderConfig{ReadPage: 2}, 2, 3, 4, 5)
	ctx, tenant, h, g, cr, l := e.ctx, e.tenant, e.h, e.g, e.cr, e.l
	gs, err := l.Group(ctx, tenant, g, 0)
	if err != nil || gs.MemberCount() != 5 || gs.Version() != 5 {
		t.Fatalf("first load: %d members at version %d, %v", gs.MemberCount(), gs.Version(), err)
	}
	if n := cr.events.Load(); n != 5 {
		t.Errorf("first load read %d events, want 5 (in pages of 2)", n)
	}
	join(t, h, tenant, g, 6)
	cr.events.Store(0)
	if gs, err = l.Group(ctx, tenant, g, 0); err != nil || gs.MemberCount() != 6 {
		t.Fatalf("second load: %d members, %v", gs.MemberCount(), err)
	}
	if n := cr.events.Load(); n != 1 {
		t.Errorf("second load read %d events, want only the new one", n)
	}

	reads := cr.reads.Load()
	for range 100 {
		if _, err := l.Group(ctx, tenant, g, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if n := cr.reads.Load() - reads; n != 0 {
		t.Errorf("100 cached loads read the store %d times", n)
	}
	join(t, h, tenant, g, 7)
	if gs, _ = l.Group(ctx, tenant, g, time.Minute); gs.MemberCount() != 6 {
		t.Errorf("cached load before the invalidation: %d members, want the cached 6", gs.MemberCount())
	}
	l.Invalidate(ctx, tenant, []string{domain.GroupStreamID(g)})
	if gs, _ = l.Group(ctx, tenant, g, time.Minute); gs.MemberCount() != 7 {
		t.Errorf("cached load after the invalidation: %d members, want 7", gs.MemberCount())
	}
	if st := l.Stats(); st.Hits < 100 {
		t.Errorf("stats %+v", st)
	}
}

// An invalidation that arrives while a cached load is reading makes that read's result stale:
// the state read before the commit is not trusted afterwards.
func TestLoaderInvalidationCrossingARead(t *testing.T) {
	t.Parallel()
	e := newLoaderEnv(t, group.LoaderConfig{})
	ctx, tenant, h, g, cr, l := e.ctx, e.tenant, e.h, e.g, e.cr, e.l
	for _, warm := range []bool{false, true} {
		// Cold: nothing cached yet. Warm: a cached state that must be read again first.
		l.Invalidate(ctx, tenant, []string{domain.MembershipStreamID(g, 9)})
		cr.hold()
		done := make(chan domain.MembershipState)
		go func() {
			m, _ := l.Membership(ctx, tenant, g, 9, time.Minute)
			done <- m
		}()
		<-cr.entered // the read has seen the stream; now the commit and its invalidation
		if !warm {
			join(t, h, tenant, g, 9)
		} else {
			if _, err := h.LeaveGroup.Handle(ctx, group.LeaveGroup{Actor: who(tenant, 9), Group: g}); err != nil {
				t.Fatal(err)
			}
		}
		l.Invalidate(ctx, tenant, []string{domain.MembershipStreamID(g, 9)})
		cr.release()
		stale := <-done
		m, err := l.Membership(ctx, tenant, g, 9, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if m.Version() == stale.Version() {
			t.Errorf("warm cache %v: the load after the invalidation returned the crossed read's version %d", warm, m.Version())
		}
		if want := !warm; m.IsMember() != want {
			t.Errorf("warm cache %v: member %v after the invalidation, want %v", warm, m.IsMember(), want)
		}
	}
}

// The cache holds at most MaxEntries states; the least recently used goes first.
func TestLoaderEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	_, store := newStore(t, 4)
	ctx := testCtx(t)
	tenant := domain.MustTenantID("acme")
	cr := &countingReader{Store: store}
	l, err := group.NewLoader(cr, group.LoaderConfig{MaxEntries: 3, Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	load := func(u domain.UserID) {
		if _, err := l.Profile(ctx, tenant, u, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []domain.UserID{1, 2, 3, 1, 4} { // 4 evicts 2, the least recently used
		load(u)
	}
	before := cr.reads.Load()
	load(1)
	load(3)
	load(4)
	if n := cr.reads.Load() - before; n != 0 {
		t.Errorf("cached users read %d times", n)
	}
	load(2)
	if n := cr.reads.Load() - before; n != 1 {
		t.Errorf("evicted user: %d reads, want 1", n)
	}
}

// A state used after three quarters of its maxAge is still answered from the cache, and read
// again in the background once, so the loads after it see newer commits without waiting.
func TestLoaderReadsAheadOfExpiry(t *testing.T) {
	t.Parallel()
	e := newLoaderEnv(t, group.LoaderConfig{}, 2)
	ctx, tenant, h, g, cr, l := e.ctx, e.tenant, e.h, e.g, e.cr, e.l
	const maxAge = 4 * time.Second
	loaded := time.Now()
	if gs, err := l.Group(ctx, tenant, g, maxAge); err != nil || gs.MemberCount() != 2 {
		t.Fatalf("first load: %d members, %v", gs.MemberCount(), err)
	}
	join(t, h, tenant, g, 3) // through other handlers: this loader learns of it only by reading
	if gs, _ := l.Group(ctx, tenant, g, maxAge); gs.MemberCount() != 2 || cr.reads.Load() != 1 || l.Stats().Ahead != 0 {
		t.Fatalf("young state: %d members after %d reads, %d ahead; want the cached 2 and no read",
			gs.MemberCount(), cr.reads.Load(), l.Stats().Ahead)
	}
	time.Sleep(time.Until(loaded.Add(maxAge*3/4 + 50*time.Millisecond)))
	for range 3 {
		if gs, _ := l.Group(ctx, tenant, g, maxAge); gs.MemberCount() != 2 && gs.MemberCount() != 3 {
			t.Fatalf("aging state has %d members", gs.MemberCount())
		}
	}
	// Until the state expires, loads return it, the background read's result as soon as it
	// is stored, without another read.
	var (
		gs  domain.GroupState
		err error
	)
	for time.Since(loaded) < maxAge-300*time.Millisecond {
		if gs, err = l.Group(ctx, tenant, g, maxAge); err != nil || gs.MemberCount() == 3 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err != nil || gs.MemberCount() != 3 {
		t.Fatalf("before expiry: %d members, %v; want 3 from the background read", gs.MemberCount(), err)
	}
	if st := l.Stats(); st.Ahead != 1 || cr.reads.Load() != 2 {
		t.Errorf("stats %+v with %d reads; want 1 read ahead and no other", st, cr.reads.Load())
	}
}
