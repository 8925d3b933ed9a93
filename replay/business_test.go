package replay_test

import (
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/projections/projtest"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/replay"
)

// TestBusinessRebuildAndVerify projects a group history live, then checks that Verify finds no
// difference, that it names the members table after a live row is deleted, and that Rebuild
// restores the row.
func TestBusinessRebuildAndVerify(t *testing.T) {
	t.Parallel()
	h := projtest.NewHarness(t)
	m := projtest.NewMySQL(t)
	biz := m.BusinessStore(t)
	tn := m.Tenant("bizrebuild")
	store := projtest.NewEventStore(t, h.Pool)
	history := projtest.AppendAll(t, store, projtest.GroupHistory(t, tn, 7, 1, []domain.UserID{2, 3, 4, 5}))
	if _, err := biz.ApplyBatch(projtest.Ctx(t), tn, projections.GroupBusinessMySQL, business.DefaultTables(), history); err != nil {
		t.Fatal(err)
	}
	rb, err := replay.NewBusinessRebuilder(biz, store, m.Router, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn})
	if err != nil || !res.OK() || res.Events != int64(len(history)) {
		t.Fatalf("verify of an intact read model: %+v %v", res, err)
	}
	db, err := m.Router.DB(projtest.Ctx(t), tn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(projtest.Ctx(t), "DELETE FROM im_group_members WHERE group_id = 7 AND user_id = 3"); err != nil {
		t.Fatal(err)
	}
	res, err = rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn})
	if err != nil || len(res.Diffs) != 1 || res.Diffs[0].Part != "im_group_members" ||
		res.Diffs[0].Live.Rows+1 != res.Diffs[0].Rebuilt.Rows {
		t.Fatalf("verify after deleting a member row: %+v %v", res, err)
	}
	if _, err := rb.Rebuild(projtest.Ctx(t), replay.RebuildOptions{Projection: projections.ProjectionBusinessMySQL, Tenant: tn}); err != nil {
		t.Fatal(err)
	}
	if ok, err := biz.IsMember(projtest.Ctx(t), tn, 7, 3); err != nil || !ok {
		t.Fatalf("user 3 after the rebuild: member=%v (%v)", ok, err)
	}
	if res, err := rb.Verify(projtest.Ctx(t), replay.VerifyOptions{Tenant: tn}); err != nil || !res.OK() {
		t.Fatalf("verify after the rebuild: %+v %v", res, err)
	}
}
