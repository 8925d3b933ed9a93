package eventstore_test

import (
	"testing"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

func TestReadAllAndCount(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, _ := newStore(t, eventstore.Config{MaxRead: 4})
	acme, other := domain.MustTenantID("acme"), domain.MustTenantID("other")
	sent, recalled := domain.EventType("message.group.sent.v1"), domain.EventType("message.recalled.v1")
	var batch []domain.Envelope
	for v := int64(1); v <= 3; v++ {
		for _, tenant := range []domain.TenantID{acme, other} {
			for _, stream := range []string{"grp_1", "grp_2", "usr_1"} {
				e := event(tenant, stream, v, "")
				if v == 3 {
					e.EventType = recalled
				}
				batch = append(batch, e)
			}
		}
	}
	res, err := store.AppendBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	position := map[[16]byte]int64{}
	for i, r := range res {
		position[batch[i].EventID] = r.Position
	}

	tests := []struct {
		name   string
		filter eventstore.Filter
		want   func(domain.Envelope) bool
	}{
		{"all", eventstore.Filter{}, func(domain.Envelope) bool { return true }},
		{"tenant", eventstore.Filter{Tenant: acme}, func(e domain.Envelope) bool { return e.TenantID == acme }},
		{"types", eventstore.Filter{EventTypes: []domain.EventType{recalled, "no.such.v1"}},
			func(e domain.Envelope) bool { return e.EventType == recalled }},
		{"prefix", eventstore.Filter{StreamPrefix: "grp_"}, func(e domain.Envelope) bool { return e.StreamID != "usr_1" }},
		{"prefix is not a pattern", eventstore.Filter{StreamPrefix: "grp%"}, func(domain.Envelope) bool { return false }},
		{"all fields", eventstore.Filter{Tenant: other, EventTypes: []domain.EventType{sent}, StreamPrefix: "grp_2"},
			func(e domain.Envelope) bool {
				return e.TenantID == other && e.EventType == sent && e.StreamID == "grp_2"
			}},
	}
	for _, tt := range tests {
		var want []domain.Envelope
		for _, e := range batch {
			if tt.want(e) {
				want = append(want, withPosition(e, position[e.EventID]))
			}
		}
		n, err := store.Count(ctx, tt.filter)
		if err != nil || n != int64(len(want)) {
			t.Errorf("%s: Count = %d, %v; want %d", tt.name, n, err, len(want))
		}
		var got []domain.Envelope
		after := int64(0)
		for {
			page, err := store.ReadAll(ctx, tt.filter, after, 100) // MaxRead caps pages at 4
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > 4 {
				t.Fatalf("%s: page of %d events above MaxRead", tt.name, len(page))
			}
			if len(page) == 0 {
				break
			}
			got = append(got, page...)
			after = page[len(page)-1].Position
		}
		if len(got) != len(want) {
			t.Errorf("%s: read %d events, want %d", tt.name, len(got), len(want))
			continue
		}
		for i := range got {
			assertSameEvent(t, got[i], want[i])
		}
	}
}
