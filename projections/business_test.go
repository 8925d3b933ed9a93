package projections_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
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

func TestBusinessProjectionBuildsGroupsAndPublishesInvalidations(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	biz := m.BusinessStore(t)
	tn := m.Tenant("biz")
	other := m.Tenant("bizother")
	inv := &publishedKeys{keys: map[string]bool{}}
	h.Run(h.Config(), projections.BusinessMySQL(biz, "", inv, projtest.Logger()))

	const gid = domain.GroupID(42)
	events := projtest.GroupHistory(t, tn, gid, 1, []domain.UserID{2, 3, 4})
	otherEvents := projtest.GroupHistory(t, other, gid, 1, []domain.UserID{5})
	h.Publish(events...)
	h.Publish(otherEvents...)
	h.Publish(events...) // redelivery changes nothing
	projtest.Eventually(t, 40*time.Second, func() error {
		n, err := biz.MemberCount(projtest.Ctx(t), tn, gid)
		if err != nil || n != 4 {
			return fmt.Errorf("member count %d (%v), want 4", n, err)
		}
		n, err = biz.MemberCount(projtest.Ctx(t), other, gid)
		if err != nil || n != 2 {
			return fmt.Errorf("other tenant's member count %d (%v), want 2", n, err)
		}
		// A membership is its own stream, keyed apart from the group's: the count can be
		// projected before the member rows it counts.
		for _, u := range []domain.UserID{1, 2, 3, 4} {
			if ok, err := biz.IsMember(projtest.Ctx(t), tn, gid, u); err != nil || !ok {
				return fmt.Errorf("user %d member = %v (%v)", u, ok, err)
			}
		}
		return nil
	})
	if ok, _ := biz.IsMember(projtest.Ctx(t), tn, gid, 5); ok {
		t.Error("user 5 of the other tenant is a member here")
	}
	if inv.len() == 0 {
		t.Error("no cache invalidations were published")
	}
}
