package business_test

import (
	"testing"
	"time"

	"github.com/imledger/imledger/readmodels/business"
)

func TestChecksumDetectsADeletedRow(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	db := f.db(ctx, t)
	live := business.DefaultTables()
	copyTables := live.WithSuffix("_copy")
	if err := business.CreateTablesLike(ctx, db, live, copyTables); err != nil {
		t.Fatal(err)
	}
	events := scenario(f.w, time.Now().Add(time.Hour))
	f.apply(ctx, t, events...)
	res, err := f.store.ApplyBatch(ctx, f.tenant, "copy", copyTables, events)
	if err != nil || res.Applied != len(events) {
		t.Fatalf("apply to the copy: %+v, %v", res, err)
	}
	if len(res.Invalidated) != 0 {
		t.Fatalf("writing non-live tables invalidated caches: %v", res.Invalidated)
	}
	a := must[business.Summary](t)(f.store.Checksum(ctx, f.tenant, live))
	b := must[business.Summary](t)(f.store.Checksum(ctx, f.tenant, copyTables))
	if a != b || a.Groups.Checksum == 0 || a.Members.Rows != 5 {
		t.Fatalf("identical copies differ: %+v vs %+v", a, b)
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM im_group_members_copy WHERE group_id = 7 AND user_id = 5"); err != nil {
		t.Fatal(err)
	}
	b = must[business.Summary](t)(f.store.Checksum(ctx, f.tenant, copyTables))
	if b.Members.Rows != 4 || b.Members.Checksum == a.Members.Checksum {
		t.Fatalf("deleted member row not detected: %+v vs %+v", a.Members, b.Members)
	}
	if a.Groups != b.Groups || a.Relations != b.Relations || a.Users != b.Users {
		t.Fatalf("untouched tables differ: %+v vs %+v", a, b)
	}
	if _, err := db.ExecContext(ctx, "UPDATE im_relations_copy SET blocked = 0 WHERE user_id = 3"); err != nil {
		t.Fatal(err)
	}
	if b = must[business.Summary](t)(f.store.Checksum(ctx, f.tenant, copyTables)); b.Relations == a.Relations {
		t.Fatal("changed relation row not detected")
	}
	if err := business.DropTables(ctx, db, copyTables); err != nil {
		t.Fatal(err)
	}
}

func TestRebuildIntoSuffixedTablesThenSwap(t *testing.T) {
	t.Parallel()
	ctx, f := setup(t)
	db := f.db(ctx, t)
	live := business.DefaultTables()
	rebuilt := live.WithSuffix("_rebuild")
	events := scenario(f.w, time.Now().Add(time.Hour))
	f.apply(ctx, t, events[:5]...) // the live tables lag behind
	want := answers(ctx, t, f.store, f.tenant)

	if err := business.CreateTablesLike(ctx, db, live, rebuilt); err != nil {
		t.Fatal(err)
	}
	if n, err := f.store.Apply(ctx, f.tenant, "rebuild", rebuilt, events); err != nil || n != len(events) {
		t.Fatalf("rebuild apply: %d, %v", n, err)
	}
	if got := answers(ctx, t, f.store, f.tenant); got != want {
		t.Fatalf("a rebuild in progress changed what queries answer:\n%s\nvs\n%s", got, want)
	}
	sum := must[business.Summary](t)(f.store.Checksum(ctx, f.tenant, rebuilt))
	if err := business.SwapTables(ctx, db, live, rebuilt); err != nil {
		t.Fatal(err)
	}
	if got := must[business.Summary](t)(f.store.Checksum(ctx, f.tenant, live)); got != sum {
		t.Fatalf("after the swap the live tables hold %+v, want %+v", got, sum)
	}
	n, err := f.store.InvalidateTenant(ctx, f.tenant)
	if err != nil || n < 10 {
		t.Fatalf("InvalidateTenant dropped %d entries, %v", n, err)
	}
	if got, mysql := answers(ctx, t, f.store, f.tenant), answers(ctx, t, f.mysqlOnly(t), f.tenant); got != mysql || got == want {
		t.Fatalf("after swap and invalidation:\n%s\nmysql:\n%s", got, mysql)
	}
	var tables int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND (table_name LIKE '%\\_rebuild' OR table_name LIKE '%\\_old')").Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("%d rebuild or old tables left (%v)", tables, err)
	}
}

func TestTablesValidate(t *testing.T) {
	t.Parallel()
	bad := business.DefaultTables()
	bad.Members = "im_group_members`; DROP TABLE x; --"
	if bad.Validate() == nil {
		t.Fatal("table name with SQL accepted")
	}
	dup := business.DefaultTables()
	dup.Users = dup.Groups
	if dup.Validate() == nil {
		t.Fatal("duplicate table names accepted")
	}
	if err := business.DefaultTables().WithSuffix("_r").Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	r := newRouter(t)
	for name, cfg := range map[string]business.Config{
		"braces":    {KeyPrefix: "im:{x}:"},
		"short ttl": {CacheTTL: time.Millisecond},
		"pages":     {DefaultPageSize: 100, MaxPageSize: 10},
		"backoff":   {RedisBackoff: -time.Second},
	} {
		if _, err := business.NewStore(r, nil, cfg); err == nil {
			t.Errorf("%s: config accepted", name)
		}
	}
	if _, err := business.NewStore(nil, nil, business.Config{}); err == nil {
		t.Error("store without a router accepted")
	}
	if _, err := business.NewStore(r, nil, business.Config{}); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}
