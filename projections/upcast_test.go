package projections_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
)

// A v1 event consumed from Kafka, published as stored the way the relay publishes it, reaches the
// applier as v2.
func TestProjectorHandsOldVersionsUpcast(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	tn := domain.MustTenantID("upcast")
	rec := newRecorder()
	h.Run(h.Config(), projections.Projection{Name: "recorder", ConsumerGroup: "test.upcast", Topics: []string{"im.business.event"},
		Accept: func(t domain.EventType) bool { return t == domain.EventMemberMuted }, Applier: rec})
	var v1 []domain.Envelope
	for _, e := range projtest.MuteHistory(t, tn, time.Now().UTC(), true) {
		if e.EventType == domain.EventMemberMutedV1 {
			v1 = append(v1, e)
		}
	}
	h.Publish(v1...)
	projtest.Eventually(t, 30*time.Second, func() error {
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
