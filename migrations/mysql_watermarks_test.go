package migrations_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/migrations"
)

// The watermark migration gives the topics that have messages already their watermark: the end
// of the run of seqs from 1, stopping below an old hole.
func TestWatermarkMigrationBackfills(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	server := testenv.MySQLServer(t)
	name := testenv.UniqueName("imt_wm")
	testenv.DropMySQLDatabasesAtCleanup(t, name)
	admin, err := sql.Open("mysql", server)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", strings.Replace(server, "/?", "/"+name+"?", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectMySQL, db, migrations.MySQL(), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		table, topic string
		seq          int64
	}{
		{"im_group_messages", "grp1", 1}, {"im_group_messages", "grp1", 2}, {"im_group_messages", "grp1", 4},
		{"im_group_messages", "grp2", 2}, {"im_messages", "p2p1_2", 1}, {"im_messages", "p2p1_2", 2},
	}
	for _, r := range rows {
		var err error
		if r.table == "im_group_messages" {
			_, err = db.ExecContext(ctx, "INSERT INTO im_group_messages (topic, group_id, seqid, from_user, created_at, updated_at) VALUES (?, ?, ?, 1, NOW(3), NOW(3))",
				r.topic, strings.TrimPrefix(r.topic, "grp"), r.seq)
		} else {
			_, err = db.ExecContext(ctx, "INSERT INTO im_messages (topic, seqid, from_user, to_user, created_at, updated_at) VALUES (?, ?, 1, 2, NOW(3), NOW(3))", r.topic, r.seq)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := migrations.UpMySQL(ctx, db); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	res, err := db.QueryContext(ctx, "SELECT topic, watermark FROM im_topic_watermarks")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	for res.Next() {
		var topic string
		var w int64
		if err := res.Scan(&topic, &w); err != nil {
			t.Fatal(err)
		}
		got[topic] = w
	}
	if len(got) != 2 || got["grp1"] != 2 || got["p2p1_2"] != 2 {
		t.Fatalf("backfilled watermarks %v, want grp1 2 and p2p1_2 2 (grp2 lacks seq 1)", got)
	}
}
