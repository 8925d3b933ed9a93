package projections_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/replay"
)

// muteHistory decides, with the domain aggregates and a fixed clock, a group with three members
// of which one is muted and unmuted and another muted until later. With asV1 the mutes are
// stored as builds before member.muted.v2 stored them.
func muteHistory(t *testing.T, tenant domain.TenantID, now time.Time, asV1 bool) []domain.Envelope {
	t.Helper()
	const gid = domain.GroupID(77)
	owner := domain.UserID(1)
	g, _ := domain.NewGroupState(tenant, gid)
	ms := map[domain.UserID]*domain.MembershipState{}
	member := func(u domain.UserID) *domain.MembershipState {
		if m, ok := ms[u]; ok {
			return m
		}
		m, _ := domain.NewMembershipState(tenant, gid, u)
		ms[u] = &m
		return &m
	}
	var all []domain.Envelope
	commit := func(pending []domain.PendingEvent, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		envs, err := domain.NewEnvelopes(tenant, domain.Actor{Type: domain.ActorUser, ID: "1"}, pending)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range envs {
			if asV1 && e.EventType == domain.EventMemberMuted {
				var p domain.MemberMuted
				if err := e.Decode(&p); err != nil {
					t.Fatal(err)
				}
				e.EventType, e.Version = domain.EventMemberMutedV1, 1
				e.Payload, _ = json.Marshal(domain.MemberMutedV1{GroupID: p.GroupID, User: p.User, Until: p.Until, By: p.By, MutedAt: p.MutedAt})
			}
			if e.StreamID == g.StreamID() {
				if err := g.Apply(e); err != nil {
					t.Fatal(err)
				}
			}
			for _, m := range ms {
				if e.StreamID == m.StreamID() {
					if err := m.Apply(e); err != nil {
						t.Fatal(err)
					}
				}
			}
			all = append(all, e)
		}
	}
	p := func(u domain.UserID) domain.Principal { return domain.Principal{Tenant: tenant, User: u} }
	profile, _ := domain.NewGroupProfile("muted", "", "")
	member(owner)
	commit(g.Create(p(owner), profile, domain.DefaultGroupSettings(), now))
	for _, u := range []domain.UserID{2, 3, 4} {
		commit(g.Join(p(u), *member(u), 0, now))
	}
	commit(g.Mute(p(owner), *member(owner), *member(3), now.Add(time.Hour), now))
	commit(g.Mute(p(owner), *member(owner), *member(3), time.Time{}, now.Add(time.Minute)))
	commit(g.Mute(p(owner), *member(owner), *member(4), now.Add(2*time.Hour), now.Add(time.Minute)))
	if !member(4).MutedAt(now.Add(90*time.Minute)) || member(3).MutedAt(now.Add(2*time.Minute)) {
		t.Fatalf("the decided history does not mute 4 and lift 3 (v1: %v)", asV1)
	}
	return all
}

// A rebuild over a history whose mutes are member.muted.v1 gives the same business read model
// as the same history written as member.muted.v2.
func TestRebuildOverMixedVersionsEqualsAllCurrent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	m := newMySQL(t)
	biz := m.businessStore(t)
	store := newEventStore(t, h.pool)
	mixed, current := m.tenant("mixed"), m.tenant("current")
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := muteHistory(t, mixed, now, true)
	v1 := 0
	for _, e := range old {
		if e.EventType == domain.EventMemberMutedV1 {
			v1++
		}
	}
	if v1 != 3 {
		t.Fatalf("%d v1 events in the mixed history, want 3", v1)
	}
	appendAll(t, store, old)
	appendAll(t, store, muteHistory(t, current, now, false))
	rb, err := replay.NewBusinessRebuilder(biz, store, m.router, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range []domain.TenantID{mixed, current} {
		if _, err := rb.Rebuild(testCtx(t), replay.RebuildOptions{Tenant: tn}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := biz.Checksum(testCtx(t), mixed, business.DefaultTables())
	if err != nil {
		t.Fatal(err)
	}
	b, err := biz.Checksum(testCtx(t), current, business.DefaultTables())
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a.Members.Rows != 4 {
		t.Errorf("mixed v1/v2 history: %+v; all v2: %+v", a, b)
	}
	for u, want := range map[domain.UserID]time.Time{3: {}, 4: now.Add(2 * time.Hour)} {
		got, err := biz.MutedUntil(testCtx(t), mixed, 77, u)
		if err != nil || !got.Equal(want) {
			t.Errorf("user %d muted until %v (%v), want %v", u, got, err, want)
		}
	}
}

// A v1 event consumed from Kafka, published as stored the way the relay publishes it, reaches the
// applier as v2.
func TestProjectorHandsOldVersionsUpcast(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tn := domain.MustTenantID("upcast")
	rec := newRecorder()
	h.run(h.config(), projections.Projection{Name: "recorder", ConsumerGroup: "test.upcast", Topics: []string{"im.business.event"},
		Accept: func(t domain.EventType) bool { return t == domain.EventMemberMuted }, Applier: rec})
	var v1 []domain.Envelope
	for _, e := range muteHistory(t, tn, time.Now().UTC(), true) {
		if e.EventType == domain.EventMemberMutedV1 {
			v1 = append(v1, e)
		}
	}
	h.publish(v1...)
	eventually(t, 30*time.Second, func() error {
		if n := rec.count(); n != len(v1) {
			return fmt.Errorf("%d of %d mutes applied", n, len(v1))
		}
		return nil
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, evs := range rec.convs {
		for _, e := range evs {
			var p domain.MemberMuted
			if e.EventType != domain.EventMemberMuted || e.Version != 2 || json.Unmarshal(e.Payload, &p) != nil || p.Muted == p.Until.IsZero() {
				t.Errorf("the applier got %s version %d %s, want member.muted.v2 saying muted iff until is set", e.EventType, e.Version, e.Payload)
			}
		}
	}
}
