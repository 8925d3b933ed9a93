package projections_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/replay"
)

// publishedKeys records what the business projection publishes for other nodes.
type publishedKeys struct {
	mu   sync.Mutex
	keys map[string]bool
}

func (p *publishedKeys) Publish(_ context.Context, tenant domain.TenantID, keys []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		p.keys[tenant.String()+" "+k] = true
	}
}

func (p *publishedKeys) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.keys)
}

// groupHistory decides a group's creation and joins with the domain aggregates, as the command
// handlers do, and returns the envelopes in commit order.
func groupHistory(t *testing.T, tenant domain.TenantID, gid domain.GroupID, owner domain.UserID, joiners []domain.UserID) []domain.Envelope {
	t.Helper()
	now := time.Now().UTC()
	var all []domain.Envelope
	apply := func(pending []domain.PendingEvent, actor domain.UserID, g *domain.GroupState, m *domain.MembershipState) {
		envs, err := domain.NewEnvelopes(tenant, domain.Actor{Type: domain.ActorUser, ID: actor.String()}, pending)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range envs {
			switch {
			case e.StreamID == g.StreamID():
				if err := g.Apply(e); err != nil {
					t.Fatal(err)
				}
			case m != nil && e.StreamID == m.StreamID():
				if err := m.Apply(e); err != nil {
					t.Fatal(err)
				}
			}
		}
		all = append(all, envs...)
	}
	g, _ := domain.NewGroupState(tenant, gid)
	profile, _ := domain.NewGroupProfile("team", "", "")
	created, err := g.Create(domain.Principal{Tenant: tenant, User: owner}, profile, domain.DefaultGroupSettings(), now)
	if err != nil {
		t.Fatal(err)
	}
	apply(created, owner, &g, nil)
	for _, u := range joiners {
		m, _ := domain.NewMembershipState(tenant, gid, u)
		joined, err := g.Join(domain.Principal{Tenant: tenant, User: u}, m, 0, now)
		if err != nil {
			t.Fatal(err)
		}
		apply(joined, u, &g, &m)
	}
	return all
}

// businessStore returns a business store over m's tenants with its own Redis key prefix.
func (m *mysqlEnv) businessStore(t testing.TB) *business.Store {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	biz, err := business.NewStore(m.router, rdb, business.Config{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return biz
}

func TestBusinessProjectionBuildsGroupsAndPublishesInvalidations(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	m := newMySQL(t)
	biz := m.businessStore(t)
	tn := m.tenant("biz")
	other := m.tenant("bizother")
	inv := &publishedKeys{keys: map[string]bool{}}
	h.run(h.config(), projections.BusinessMySQL(biz, "", inv, testLogger()))

	const gid = domain.GroupID(42)
	events := groupHistory(t, tn, gid, 1, []domain.UserID{2, 3, 4})
	otherEvents := groupHistory(t, other, gid, 1, []domain.UserID{5})
	h.publish(events...)
	h.publish(otherEvents...)
	h.publish(events...) // redelivery changes nothing
	eventually(t, 40*time.Second, func() error {
		n, err := biz.MemberCount(testCtx(t), tn, gid)
		if err != nil || n != 4 {
			return fmt.Errorf("member count %d (%v), want 4", n, err)
		}
		n, err = biz.MemberCount(testCtx(t), other, gid)
		if err != nil || n != 2 {
			return fmt.Errorf("other tenant's member count %d (%v), want 2", n, err)
		}
		// A membership is its own stream, keyed apart from the group's: the count can be
		// projected before the member rows it counts.
		for _, u := range []domain.UserID{1, 2, 3, 4} {
			if ok, err := biz.IsMember(testCtx(t), tn, gid, u); err != nil || !ok {
				return fmt.Errorf("user %d member = %v (%v)", u, ok, err)
			}
		}
		return nil
	})
	if ok, _ := biz.IsMember(testCtx(t), tn, gid, 5); ok {
		t.Error("user 5 of the other tenant is a member here")
	}
	if inv.len() == 0 {
		t.Error("no cache invalidations were published")
	}
}

// TestBusinessRebuildAndVerify projects a group history live, then checks that Verify finds no
// difference, that it names the members table after a live row is deleted, and that Rebuild
// restores the row.
func TestBusinessRebuildAndVerify(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	m := newMySQL(t)
	biz := m.businessStore(t)
	tn := m.tenant("bizrebuild")
	store := newEventStore(t, h.pool)
	history := appendAll(t, store, groupHistory(t, tn, 7, 1, []domain.UserID{2, 3, 4, 5}))
	if _, err := biz.ApplyBatch(testCtx(t), tn, projections.GroupBusinessMySQL, business.DefaultTables(), history); err != nil {
		t.Fatal(err)
	}
	rb, err := replay.NewBusinessRebuilder(biz, store, m.router, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := rb.Verify(testCtx(t), replay.VerifyOptions{Tenant: tn})
	if err != nil || !res.OK() || res.Events != int64(len(history)) {
		t.Fatalf("verify of an intact read model: %+v %v", res, err)
	}
	db, err := m.router.DB(testCtx(t), tn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(testCtx(t), "DELETE FROM im_group_members WHERE group_id = 7 AND user_id = 3"); err != nil {
		t.Fatal(err)
	}
	res, err = rb.Verify(testCtx(t), replay.VerifyOptions{Tenant: tn})
	if err != nil || len(res.Diffs) != 1 || res.Diffs[0].Part != "im_group_members" ||
		res.Diffs[0].Live.Rows+1 != res.Diffs[0].Rebuilt.Rows {
		t.Fatalf("verify after deleting a member row: %+v %v", res, err)
	}
	if _, err := rb.Rebuild(testCtx(t), replay.RebuildOptions{Projection: projections.ProjectionBusinessMySQL, Tenant: tn}); err != nil {
		t.Fatal(err)
	}
	if ok, err := biz.IsMember(testCtx(t), tn, 7, 3); err != nil || !ok {
		t.Fatalf("user 3 after the rebuild: member=%v (%v)", ok, err)
	}
	if res, err := rb.Verify(testCtx(t), replay.VerifyOptions{Tenant: tn}); err != nil || !res.OK() {
		t.Fatalf("verify after the rebuild: %+v %v", res, err)
	}
}
