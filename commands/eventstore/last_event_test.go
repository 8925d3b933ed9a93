package eventstore_test

import (
	"testing"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// LastEvent answers the stream's highest version, not the first or another stream's, and reports
// an unknown stream as empty.
func TestLastEventIsTheStreamsNewest(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t, eventstore.Config{})
	ctx := testCtx(t)
	tenant := domain.MustTenantID("acme")
	for _, c := range []struct {
		stream string
		n      int
	}{{"s-a", 3}, {"s-b", 1}} {
		var events []domain.Envelope
		for i := range c.n {
			events = append(events, event(tenant, c.stream, int64(i+1), ""))
		}
		if _, err := store.Append(ctx, tenant, c.stream, 0, events); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		tenant  domain.TenantID
		stream  string
		found   bool
		version int64
	}{
		{tenant, "s-a", true, 3},
		{tenant, "s-b", true, 1},
		{tenant, "s-c", false, 0},
		{domain.MustTenantID("other"), "s-a", false, 0},
	}
	for _, c := range cases {
		e, found, err := store.LastEvent(ctx, c.tenant, c.stream)
		if err != nil || found != c.found || e.StreamVersion != c.version || (found && e.StreamID != c.stream) {
			t.Errorf("LastEvent(%s, %s) = v%d %v %v, want v%d %v", c.tenant, c.stream, e.StreamVersion, found, err, c.version, c.found)
		}
	}
}
