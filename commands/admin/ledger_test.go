package admin

import (
	"context"
	"sync"
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
	l := newLedger(pool, "g", "o", time.Minute)
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

// TestCoalescedClaimsNeverHoldACommandTwice: claims made while one runs go in one statement,
// except that two holding the same command go in different ones (one statement would report the
// id once, and both batches would take it as theirs and run it).
func TestCoalescedClaimsNeverHoldACommandTwice(t *testing.T) {
	var (
		mu      sync.Mutex
		rounds  [][]uuid.UUID
		release = make(chan struct{})
		started = make(chan struct{}, 8)
	)
	g := newLedgerGroup(func(_ context.Context, items []*item) (map[uuid.UUID]bool, error) {
		mu.Lock()
		ids := map[uuid.UUID]bool{}
		var round []uuid.UUID
		for _, it := range items {
			ids[it.cmd.EventID] = true
			round = append(round, it.cmd.EventID)
		}
		rounds = append(rounds, round)
		first := len(rounds) == 1
		mu.Unlock()
		started <- struct{}{}
		if first {
			<-release
		}
		return ids, nil
	})
	newItem := func(id uuid.UUID) *item { return &item{cmd: domain.AdminCommand{EventID: id}} }
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	go func() { _, _ = doLedger(context.Background(), g, []*item{newItem(uuid.New())}) }()
	<-started
	var wg sync.WaitGroup
	answers := make([]map[uuid.UUID]bool, 3)
	for i, items := range [][]*item{{newItem(a), newItem(b)}, {newItem(b)}, {newItem(c)}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if answers[i], err = doLedger(context.Background(), g, items); err != nil {
				t.Error(err)
			}
		}()
		for g.Queued() < i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	close(release)
	wg.Wait()
	if len(rounds) != 3 {
		t.Fatalf("rounds %v: want the first alone, then [a b c], then [b]", rounds)
	}
	if len(rounds[1]) != 3 || len(rounds[2]) != 1 || rounds[2][0] != b {
		t.Fatalf("rounds %v: want [a b c] then [b]", rounds)
	}
	if !answers[0][a] || !answers[0][b] || !answers[1][b] || !answers[2][c] || len(answers[0]) != 2 {
		t.Fatalf("answers %v: each call must get the ids of its own items", answers)
	}
}

// TestTwoConsumersClaimingTheSameCommandsNeverDeadlock: two consumers whose claims hold the same
// two commands in opposite orders (as after a rebalance) both finish without waiting for
// PostgreSQL's deadlock detection (5 s here), and each command is claimed by exactly one. A
// trigger slows every insert so the two statements overlap.
func TestTwoConsumersClaimingTheSameCommandsNeverDeadlock(t *testing.T) {
	ctx := testenv.Context(t)
	pool, _ := storetest.EventStore(t, 0)
	newPool := storetest.DeadlockTimeout(t, pool, 5*time.Second)
	for _, sql := range []string{
		`CREATE FUNCTION slow_claim() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.2); RETURN NEW; END $$`,
		`CREATE TRIGGER slow_claim BEFORE INSERT ON admin_commands FOR EACH ROW EXECUTE FUNCTION slow_claim()`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	consumer := func(owner string) *ledger { return newLedger(newPool(), "g", owner, time.Minute) }
	a, b := consumer("a"), consumer("b")
	first, second := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	newItem := func(id uuid.UUID) *item {
		return &item{cmd: domain.AdminCommand{EventID: id, TenantID: "t1", EventType: "user.ban"}}
	}
	var (
		wg      sync.WaitGroup
		claimed [2]map[uuid.UUID]bool
	)
	start := time.Now()
	for i, c := range []struct {
		l   *ledger
		ids []uuid.UUID
	}{{a, []uuid.UUID{first, second}}, {b, []uuid.UUID{second, first}}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if claimed[i], err = c.l.claimNew(ctx, []*item{newItem(c.ids[0]), newItem(c.ids[1])}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	for _, id := range []uuid.UUID{first, second} {
		if claimed[0][id] == claimed[1][id] {
			t.Errorf("command %s claimed by a: %v, by b: %v; want exactly one", id, claimed[0][id], claimed[1][id])
		}
	}
	if took > 3*time.Second {
		t.Fatalf("the two claims took %s: they waited for the deadlock detection", took.Round(time.Millisecond))
	}
}
