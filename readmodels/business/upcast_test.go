package business_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

// v1 turns a member.muted.v2 envelope into the member.muted.v1 an older build stored.
func v1(t *testing.T, e domain.Envelope) domain.Envelope {
	t.Helper()
	var p domain.MemberMuted
	if err := e.Decode(&p); err != nil {
		t.Fatal(err)
	}
	e.EventType, e.Version = domain.EventMemberMutedV1, 1
	e.Payload, _ = json.Marshal(domain.MemberMutedV1{GroupID: p.GroupID, User: p.User, Until: p.Until, By: p.By, MutedAt: p.MutedAt})
	return e
}

// Events handed to the store as stored by an older build (member.muted.v1, not upcast by the
// reader) are upcast by the store itself: a v1 mute mutes, a v1 lift lifts.
func TestApplyUpcastsOldVersions(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	w := f.w
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	f.apply(ctx, t, w.create(7, 1, "seven")...)
	f.apply(ctx, t, w.join(7, 2, 3)...)
	for _, e := range w.mute(7, 1, 2, until) {
		f.apply(ctx, t, v1(t, e))
	}
	for _, e := range w.mute(7, 1, 3, until) {
		f.apply(ctx, t, v1(t, e))
	}
	for _, e := range w.mute(7, 1, 3, time.Time{}) {
		f.apply(ctx, t, v1(t, e))
	}
	if got, err := f.store.MutedUntil(ctx, f.tenant, 7, 2); err != nil || !got.Equal(until) {
		t.Errorf("a v1 mute: muted until %v (%v), want %v", got, err, until)
	}
	if got, err := f.store.MutedUntil(ctx, f.tenant, 7, 3); err != nil || !got.IsZero() {
		t.Errorf("a v1 lift: muted until %v (%v), want not muted", got, err)
	}
}
