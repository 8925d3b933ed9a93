package replay_test

import (
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections/projtest"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/replay"
)

// A rebuild over a history whose mutes are member.muted.v1 gives the same business read model
// as the same history written as member.muted.v2.
func TestRebuildOverMixedVersionsEqualsAllCurrent(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	biz := m.BusinessStore(t)
	store := projtest.NewEventStore(t, h.Pool)
	mixed, current := m.Tenant("mixed"), m.Tenant("current")
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := projtest.MuteHistory(t, mixed, now, true)
	v1 := 0
	for _, e := range old {
		if e.EventType == domain.EventMemberMutedV1 {
			v1++
		}
	}
	if v1 != 3 {
		t.Fatalf("%d v1 events in the mixed history, want 3", v1)
	}
	projtest.AppendAll(t, store, old)
	projtest.AppendAll(t, store, projtest.MuteHistory(t, current, now, false))
	rb, err := replay.NewBusinessRebuilder(biz, store, m.Router, projtest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range []domain.TenantID{mixed, current} {
		if _, err := rb.Rebuild(projtest.Ctx(t), replay.RebuildOptions{Tenant: tn}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := biz.Checksum(projtest.Ctx(t), mixed, business.DefaultTables())
	if err != nil {
		t.Fatal(err)
	}
	b, err := biz.Checksum(projtest.Ctx(t), current, business.DefaultTables())
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a.Members.Rows != 4 {
		t.Errorf("mixed v1/v2 history: %+v; all v2: %+v", a, b)
	}
	for u, want := range map[domain.UserID]time.Time{3: {}, 4: now.Add(2 * time.Hour)} {
		got, err := biz.MutedUntil(projtest.Ctx(t), mixed, 77, u)
		if err != nil || !got.Equal(want) {
			t.Errorf("user %d muted until %v (%v), want %v", u, got, err, want)
		}
	}
}
