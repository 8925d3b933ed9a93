package msgstore_test

import (
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/internal/rmtest"
	"github.com/imledger/imledger/readmodels/msgstore"
)

func TestRebuildIntoSuffixedTablesThenSwap(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	db := f.db(ctx, t)
	live := msgstore.DefaultTables()
	rebuilt := live.WithSuffix("_rebuild")
	events := []domain.Envelope{
		rmtest.Sent(t, f.tenant, "grp7", 1, 10, "a"),
		rmtest.Sent(t, f.tenant, "grp7", 2, 10, "b"),
		rmtest.Sent(t, f.tenant, "p2p10_20", 1, 20, "c"),
		rmtest.Deleted(t, f.tenant, "grp7", 2, 20),
		rmtest.Edited(t, f.tenant, "grp7", 1, 10, 2, "a2"),
	}
	f.apply(ctx, t, events[:3]...) // the live tables lag behind

	if err := msgstore.CreateTablesLike(ctx, db, live, rebuilt); err != nil {
		t.Fatal(err)
	}
	if n, err := f.store.Apply(ctx, f.tenant, group, rebuilt, events); err != nil || n != 5 {
		t.Fatalf("rebuild apply: %d, %v", n, err)
	}
	want, err := f.store.Checksum(ctx, f.tenant, rebuilt)
	if err != nil {
		t.Fatal(err)
	}
	if err := msgstore.SwapTables(ctx, db, live, rebuilt); err != nil {
		t.Fatal(err)
	}
	got, err := f.store.Checksum(ctx, f.tenant, live)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["grp7"] != want["grp7"] || got["p2p10_20"] != want["p2p10_20"] {
		t.Fatalf("after swap the live tables hold %+v, want %+v", got, want)
	}
	c, err := f.store.Counts(ctx, f.tenant, live)
	if err != nil {
		t.Fatal(err)
	}
	if c.Deletions != 1 || c.GroupMessages == 0 {
		t.Fatalf("live counts after swap %+v", c)
	}
	for _, name := range []string{"im_group_messages_rebuild", "im_group_messages_old"} {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", name).Scan(&n); err != nil || n != 0 {
			t.Fatalf("table %s still exists (%d, %v)", name, n, err)
		}
	}
}

func TestChecksumNamesTheTopicThatDiffers(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	db := f.db(ctx, t)
	copyTables := f.tables.WithSuffix("_copy")
	if err := msgstore.CreateTablesLike(ctx, db, f.tables, copyTables); err != nil {
		t.Fatal(err)
	}
	var events []domain.Envelope
	for seq := int64(1); seq <= 4; seq++ {
		events = append(events, rmtest.Sent(t, f.tenant, "grp7", seq, 10, "x"), rmtest.Sent(t, f.tenant, "grp8", seq, 10, "x"))
	}
	f.apply(ctx, t, events...)
	if _, err := f.store.Apply(ctx, f.tenant, group, copyTables, events); err != nil {
		t.Fatal(err)
	}
	a, _ := f.store.Checksum(ctx, f.tenant, f.tables)
	b, _ := f.store.Checksum(ctx, f.tenant, copyTables)
	if a["grp7"] != b["grp7"] || a["grp8"] != b["grp8"] || a["grp7"].Checksum == 0 {
		t.Fatalf("identical copies differ: %+v vs %+v", a, b)
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM im_group_messages_copy WHERE topic = 'grp8' AND seqid = 3"); err != nil {
		t.Fatal(err)
	}
	b, err := f.store.Checksum(ctx, f.tenant, copyTables)
	if err != nil {
		t.Fatal(err)
	}
	if a["grp7"] != b["grp7"] {
		t.Fatalf("grp7 differs although untouched")
	}
	if a["grp8"].Checksum == b["grp8"].Checksum || b["grp8"].Rows != 3 {
		t.Fatalf("grp8 after deleting a row: %+v vs %+v", a["grp8"], b["grp8"])
	}
	if err := msgstore.DropTables(ctx, db, copyTables); err != nil {
		t.Fatal(err)
	}
}

func TestTablesValidate(t *testing.T) {
	t.Parallel()
	bad := msgstore.DefaultTables()
	bad.ReadMarks = "im_read_marks`; DROP TABLE x; --"
	if bad.Validate() == nil {
		t.Fatal("table name with SQL accepted")
	}
	dup := msgstore.DefaultTables()
	dup.Deletions = dup.ReadMarks
	if dup.Validate() == nil {
		t.Fatal("duplicate table names accepted")
	}
	if err := msgstore.DefaultTables().WithSuffix("_r").Validate(); err != nil {
		t.Fatal(err)
	}
}
