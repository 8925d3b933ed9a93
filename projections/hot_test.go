package projections_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/imledger/imledger/projections/projtest"

	"github.com/imledger/imledger/projections"
)

// TestSendRecallEditEndInFinalStateInMySQLAndRedis runs both projections on the same events,
// published in the order send, recall, edit: both read models end in the final state.
func TestSendRecallEditEndInFinalStateInMySQLAndRedis(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	hs := projtest.NewHot(t)
	tn := m.Tenant("both")
	h.Run(h.Config(), projections.MessagesMySQL(m.Store, ""), projections.MessagesHot(hs, ""))
	g := projtest.GroupTopic(9)
	h.Publish(
		projtest.SentEvent(tn, g, 1, 5, "keep"),
		projtest.SentEvent(tn, g, 2, 6, "secret"),
		projtest.SentEvent(tn, g, 3, 5, "draft"),
		projtest.RecallEvent(tn, g, 2, 6, 1),
		projtest.EditEvent(tn, g, 3, 5, 2, "final"),
	)
	projtest.Eventually(t, 30*time.Second, func() error {
		sql := m.Page(tn, g)
		if len(sql) != 3 || !sql[1].Recalled() || string(sql[2].Content) != `"final"` {
			return fmt.Errorf("mysql: %+v", sql)
		}
		red := projtest.HotRange(t, hs, tn, g, 3)
		if len(red) != 3 || !red[1].Recalled() || string(red[2].Content) != `"final"` {
			return fmt.Errorf("redis: %+v", red)
		}
		return nil
	})
	red := projtest.HotRange(t, hs, tn, g, 3)
	if red[1].Content != nil || string(red[0].Content) != `"keep"` || red[2].Version != 2 {
		t.Errorf("redis final state %+v", red)
	}
	if last, _, err := hs.LastSeq(projtest.Ctx(t), tn, g); err != nil || last != 3 {
		t.Errorf("hot last seq = %d, %v", last, err)
	}
}
