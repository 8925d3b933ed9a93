package group_test

import (
	"errors"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
)

// A mute that ends past the last instant an event payload can carry (9999-12-31T23:59:59.
// 999999999Z; a later RFC 3339 time such as 9999-12-31T23:59:59-01:00 still parses) is refused
// as a bad until, not as an event payload the store could not encode, and nothing is written.
func TestMuteBeyondTheYear9999IsABadUntil(t *testing.T) {
	t.Parallel()
	_, store := newStore(t, 4)
	tenant := domain.MustTenantID("acme")
	storetest.RegisterUsers(t, store, tenant, 1, 2)
	h := newHandlers(t, store, group.Deps{}, group.Config{})
	ctx := testCtx(t)
	owner := who(tenant, 1)
	g := createGroup(t, h, owner, nil)
	join(t, h, tenant, g, 2)
	last := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	for _, until := range []time.Time{last.Add(time.Nanosecond), time.Date(9999, 12, 31, 23, 59, 59, 0, time.FixedZone("", -3600))} {
		_, err := h.MuteMember.Handle(ctx, group.MuteMember{Actor: owner, Group: g, User: 2, Until: until})
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != "until" {
			t.Errorf("mute until %s: %v, want a ValidationError of field until", until.Format(time.RFC3339), err)
		}
	}
	if v := memberState(t, store, tenant, g, 2).Version(); v != 1 {
		t.Errorf("member 2 at version %d after refused mutes, want 1", v)
	}
	if _, err := h.MuteMember.Handle(ctx, group.MuteMember{Actor: owner, Group: g, User: 2, Until: last}); err != nil {
		t.Errorf("mute until %s: %v", last.Format(time.RFC3339Nano), err)
	}
}
