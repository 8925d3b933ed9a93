package group_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// testCtx returns a context that ends with the test or after two minutes.
func testCtx(t testing.TB) context.Context { return testenv.Context(t) }

// newStore migrates a fresh database and returns a pool with maxConns connections and a store.
func newStore(t testing.TB, maxConns int32) (*pgxpool.Pool, *eventstore.Store) {
	t.Helper()
	return storetest.EventStore(t, maxConns)
}

// newHandlers builds handlers over store; a nil deps.Store means store.
func newHandlers(t testing.TB, store group.Store, deps group.Deps, cfg group.Config) *group.Handlers {
	t.Helper()
	if deps.Store == nil {
		deps.Store = store
	}
	h, err := group.New(deps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// who returns the principal of user u in tenant.
func who(tenant domain.TenantID, u domain.UserID) domain.Principal {
	return domain.Principal{Tenant: tenant, User: u}
}

func groupProfile(t testing.TB, name string) domain.GroupProfile {
	t.Helper()
	p, err := domain.NewGroupProfile(name, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// createGroup creates a group owned by owner with settings (nil: defaults) and returns its id.
func createGroup(t testing.TB, h *group.Handlers, owner domain.Principal, settings *domain.GroupSettings) domain.GroupID {
	t.Helper()
	res, err := h.CreateGroup.Handle(testCtx(t), group.CreateGroup{Actor: owner, Profile: groupProfile(t, "g"), Settings: settings})
	if err != nil {
		t.Fatalf("create group: %v", err)
	}
	return res.Group
}

// join makes each user join g (which needs no approval).
func join(t testing.TB, h *group.Handlers, tenant domain.TenantID, g domain.GroupID, users ...domain.UserID) {
	t.Helper()
	for _, u := range users {
		if _, err := h.JoinGroup.Handle(testCtx(t), group.JoinGroup{Actor: who(tenant, u), Group: g}); err != nil {
			t.Fatalf("user %d joins: %v", u, err)
		}
	}
}

// reasonOf returns the refusal reason of err, "" when it is no refusal.
func reasonOf(err error) string {
	var d *domain.DeniedError
	if errors.As(err, &d) {
		return d.Reason
	}
	return ""
}

// fold reads a whole stream and folds it with apply.
func readAll(t testing.TB, store *eventstore.Store, tenant domain.TenantID, stream string) []domain.Envelope {
	t.Helper()
	var out []domain.Envelope
	for {
		var after int64
		if len(out) > 0 {
			after = out[len(out)-1].StreamVersion
		}
		page, err := store.ReadStream(testCtx(t), tenant, stream, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out
		}
	}
}

// groupState folds a group from the store, bypassing every cache.
func groupState(t testing.TB, store *eventstore.Store, tenant domain.TenantID, g domain.GroupID) domain.GroupState {
	t.Helper()
	s, err := domain.FoldGroup(tenant, g, readAll(t, store, tenant, domain.GroupStreamID(g)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// memberState folds a membership from the store, bypassing every cache.
func memberState(t testing.TB, store *eventstore.Store, tenant domain.TenantID, g domain.GroupID, u domain.UserID) domain.MembershipState {
	t.Helper()
	s, err := domain.FoldMembership(tenant, g, u, readAll(t, store, tenant, domain.MembershipStreamID(g, u)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// recorder is a Notifier and Invalidator that remembers what it heard.
type recorder struct {
	mu      sync.Mutex
	changes []string
	streams []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, s)
}

func (r *recorder) GroupChanged(_ context.Context, _ domain.TenantID, g domain.GroupID, c group.ChangeKind) {
	r.add("group " + g.String() + " " + string(c))
}

func (r *recorder) MembershipChanged(_ context.Context, _ domain.TenantID, g domain.GroupID, u domain.UserID, c group.ChangeKind) {
	r.add("member " + g.String() + " " + u.String() + " " + string(c))
}

func (r *recorder) RelationChanged(_ context.Context, _ domain.TenantID, a, b domain.UserID, c group.ChangeKind) {
	r.add("relation " + a.String() + " " + b.String() + " " + string(c))
}

func (r *recorder) ProfileChanged(_ context.Context, _ domain.TenantID, u domain.UserID) {
	r.add("profile " + u.String())
}

func (r *recorder) Invalidate(_ context.Context, tenant domain.TenantID, streams []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range streams {
		r.streams = append(r.streams, tenant.String()+"/"+s)
	}
}

// take returns and clears what r heard.
func (r *recorder) take() (changes, streams []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	changes, streams = r.changes, r.streams
	r.changes, r.streams = nil, nil
	return changes, streams
}

// failingStore fails every call, for tests that must not reach the store.
type failingStore struct{}

func (failingStore) ReadStream(context.Context, domain.TenantID, string, int64, int) ([]domain.Envelope, error) {
	return nil, errors.New("store reached")
}

func (failingStore) AppendStreams(context.Context, domain.TenantID, []eventstore.StreamAppend) ([]domain.Envelope, error) {
	return nil, errors.New("store reached")
}

func isConcurrency(err error) bool { return errors.Is(err, domain.ErrConcurrency) }
