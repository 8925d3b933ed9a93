package admin

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// TestFinishReadsOnlyTheCommandsItAnswers finishes commands on one connection while the ledger
// is small, so PostgreSQL settles on a generic plan, then again after the group has 20,000
// commands: every finish must find its rows by primary key, not read the group's commands.
func TestFinishReadsOnlyTheCommandsItAnswers(t *testing.T) {
	ctx := testenv.Context(t)
	pool, _ := storetest.EventStore(t, 1) // one connection: one plan cache
	l := &ledger{pool: pool, group: "g", owner: "o", timeout: time.Minute}
	finish := func() {
		t.Helper()
		it := &item{cmd: domain.AdminCommand{EventID: uuid.Must(uuid.NewV7()), TenantID: "t1", EventType: "user.ban"}}
		if _, err := l.claimNew(ctx, []*item{it}); err != nil {
			t.Fatal(err)
		}
		it.res = &domain.AdminResult{Status: domain.AdminSucceeded, CommandEventID: it.cmd.EventID.String()}
		lost, err := l.finishBatch(ctx, []*item{it})
		if err != nil {
			t.Fatal(err)
		}
		if lost[it.cmd.EventID] {
			t.Fatalf("finish of a command this consumer holds reported it taken over")
		}
	}
	for range 10 {
		finish()
	}
	if _, err := pool.Exec(ctx, `INSERT INTO admin_commands (consumer_group, event_id, tenant_id, command_type, status, owner,
			attempts, result, finished_at)
		SELECT 'g', gen_random_uuid(), 't1', 'user.ban', 'succeeded', 'o', 1, '{}', now() FROM generate_series(1, 20000)`); err != nil {
		t.Fatal(err)
	}
	before := indexTuplesRead(t, pool.Config().ConnString())
	for range 10 {
		finish()
	}
	pool.Close() // the backend reports its statistics as it exits
	var read int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		read = indexTuplesRead(t, pool.Config().ConnString()) - before
		if read > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	// By primary key, 10 claims and 10 finishes read a few tuples each; by consumer_group alone,
	// each finish reads the group's 20,000.
	if read == 0 || read > 1000 {
		t.Fatalf("10 claims and finishes read %d tuples of admin_commands' primary key: want 1..1000", read)
	}
}

// indexTuplesRead returns how many index tuples the scans of admin_commands' primary key have
// returned, as the statistics collector has heard so far.
func indexTuplesRead(t *testing.T, url string) int64 {
	t.Helper()
	ctx := testenv.Context(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, `SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'admin_commands_pkey'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
