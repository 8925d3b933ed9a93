package eventstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
)

// TestAppendWithStatementWritesBothOrNeither: the hook's statement is written with the events it
// was built from, in their statement; when the stream is not at the expected version neither is
// written; when the statement fails the events are not written either.
func TestAppendWithStatementWritesBothOrNeither(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, pool := newStore(t, eventstore.Config{})
	tenant := domain.MustTenantID("acme")
	createMirror(t, pool)
	mirror := mirrorHook(func(string) string { return "" })
	version := func() (v int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM mirror WHERE stream = 'grp1'`).Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}

	stored, err := store.AppendWithStatement(ctx, tenant, "grp1", 0, []domain.Envelope{event(tenant, "grp1", 0, ""), event(tenant, "grp1", 0, "")}, mirror)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2 || stored[1].StreamVersion != 2 || stored[0].Position == 0 || stored[1].Position <= stored[0].Position {
		t.Fatalf("stored = %+v", stored)
	}
	if v := version(); v != 2 {
		t.Fatalf("mirror at %d after two events, want 2", v)
	}

	// A stale expected version: nothing appended, the statement changes nothing.
	_, err = store.AppendWithStatement(ctx, tenant, "grp1", 0, []domain.Envelope{event(tenant, "grp1", 0, "")}, mirror)
	if !errors.Is(err, domain.ErrConcurrency) {
		t.Fatalf("append at a stale version: %v, want ErrConcurrency", err)
	}
	if v := version(); v != 2 {
		t.Fatalf("mirror at %d after a refused append, want 2", v)
	}

	// The statement fails (version 3 breaks its check): the event is not stored.
	if _, err = store.AppendWithStatement(ctx, tenant, "grp1", 2, []domain.Envelope{event(tenant, "grp1", 0, "")}, mirror); err == nil {
		t.Fatal("append whose statement fails: no error")
	}
	last, err := store.LastVersion(ctx, tenant, "grp1")
	if err != nil {
		t.Fatal(err)
	}
	if last != 2 {
		t.Fatalf("stream at %d after an append whose statement failed, want 2", last)
	}
}

// TestStatementAppendsMadeMeanwhileShareATransaction: the AppendWithStatement calls made while
// one is in flight go together, as one transaction (their events share a tx_id); two of them at
// the same expected version of one stream still let exactly one through; a round in which one
// statement fails still writes the others.
func TestStatementAppendsMadeMeanwhileShareATransaction(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	store, pool := newStore(t, eventstore.Config{})
	tenant := domain.MustTenantID("acme")
	createMirror(t, pool)
	// The hook of stream "slow" holds its round for half a second, so the calls made meanwhile
	// queue behind it.
	mirror := mirrorHook(func(stream string) string {
		if stream == "slow" {
			return "0.5"
		}
		return ""
	})
	appendAll := func(streams []string, expected []int64) []error {
		errs := make([]error, len(streams))
		slow := make(chan struct{})
		go func() {
			defer close(slow)
			if _, err := store.AppendWithStatement(ctx, tenant, "slow", lastVersion(t, store, tenant, "slow"), []domain.Envelope{event(tenant, "slow", 0, "")}, mirror); err != nil {
				t.Error(err)
			}
		}()
		time.Sleep(150 * time.Millisecond)
		var wg sync.WaitGroup
		for i, s := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = store.AppendWithStatement(ctx, tenant, s, expected[i], []domain.Envelope{event(tenant, s, 0, "")}, mirror)
			}()
		}
		wg.Wait()
		<-slow
		return errs
	}

	errs := appendAll([]string{"a", "b", "c", "a"}, []int64{0, 0, 0, 0})
	if errs[1] != nil || errs[2] != nil {
		t.Fatalf("appends to b and c: %v, %v", errs[1], errs[2])
	}
	if (errs[0] == nil) == (errs[3] == nil) || !errors.Is(errors.Join(errs[0], errs[3]), domain.ErrConcurrency) {
		t.Fatalf("two appends to a at version 0: %v and %v, want one through and one ErrConcurrency", errs[0], errs[3])
	}
	var txs int
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT tx_id) FROM events WHERE stream_id IN ('a', 'b', 'c')`).Scan(&txs); err != nil {
		t.Fatal(err)
	}
	if txs != 1 {
		t.Fatalf("the appends made while one ran committed in %d transactions, want 1", txs)
	}

	// "d" at version 2 makes its statement fail (the mirror's check): "e" in its round is written.
	if _, err := store.AppendWithStatement(ctx, tenant, "d", 0, []domain.Envelope{event(tenant, "d", 0, ""), event(tenant, "d", 0, "")}, mirror); err != nil {
		t.Fatal(err)
	}
	errs = appendAll([]string{"d", "e"}, []int64{2, 0})
	if errs[0] == nil || errs[1] != nil {
		t.Fatalf("a failing statement and a good one in a round: %v, %v; want an error and nil", errs[0], errs[1])
	}
	for stream, want := range map[string]int64{"d": 2, "e": 1} {
		if v := lastVersion(t, store, tenant, stream); v != want {
			t.Errorf("stream %s at version %d, want %d", stream, v, want)
		}
	}
	var mirrored int64
	if err := pool.QueryRow(ctx, `SELECT version FROM mirror WHERE stream = 'e'`).Scan(&mirrored); err != nil || mirrored != 1 {
		t.Fatalf("mirror of e: %d, %v; want 1", mirrored, err)
	}
}

func lastVersion(t *testing.T, store *eventstore.Store, tenant domain.TenantID, stream string) int64 {
	t.Helper()
	v, err := store.LastVersion(context.Background(), tenant, stream)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRoundsOfTwoNodesNeverDeadlock: two stores (two nodes) whose rounds hold the same two
// streams, queued in opposite orders, both finish without waiting for PostgreSQL's deadlock
// detection (set to 5 s here): a round writes its streams in their order, so the second waits
// for the first instead of each waiting for the other.
func TestRoundsOfTwoNodesNeverDeadlock(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	_, pool := newStore(t, eventstore.Config{})
	tenant := domain.MustTenantID("acme")
	createMirror(t, pool)
	newPool := storetest.DeadlockTimeout(t, pool, 5*time.Second)
	node := func() *eventstore.Store {
		s, err := eventstore.New(newPool(), eventstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := node(), node()
	// Every statement holds its round a while after writing its stream's rows, so the two
	// rounds overlap; "slow" statements hold the first round of each node while the others queue.
	mirror := mirrorHook(func(stream string) string {
		if strings.HasPrefix(stream, "slow") {
			return "0.3"
		}
		return "0.2"
	})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs = map[string][]error{}
	)
	run := func(s *eventstore.Store, stream string) {
		defer wg.Done()
		_, err := s.AppendWithStatement(ctx, tenant, stream, 0, []domain.Envelope{event(tenant, stream, 0, "")}, mirror)
		mu.Lock()
		errs[stream] = append(errs[stream], err)
		mu.Unlock()
	}
	start := time.Now()
	wg.Add(2)
	go run(a, "slow-a")
	go run(b, "slow-b")
	time.Sleep(100 * time.Millisecond)
	for _, q := range []struct {
		s       *eventstore.Store
		streams []string
	}{{a, []string{"u1", "u2"}}, {b, []string{"u2", "u1"}}} {
		for _, stream := range q.streams {
			wg.Add(1)
			go run(q.s, stream)
			time.Sleep(10 * time.Millisecond) // queued in this order
		}
	}
	wg.Wait()
	took := time.Since(start)
	for _, stream := range []string{"u1", "u2"} {
		if e := errs[stream]; len(e) != 2 || (e[0] == nil) == (e[1] == nil) || !errors.Is(errors.Join(e...), domain.ErrConcurrency) {
			t.Errorf("two appends to %s at version 0 on two nodes: %v, want one through and one ErrConcurrency", stream, e)
		}
	}
	if took > 3*time.Second {
		t.Fatalf("the two nodes' rounds took %s: they waited for the deadlock detection", took.Round(time.Millisecond))
	}
	t.Logf("both rounds done after %s", took.Round(time.Millisecond))
}

// createMirror creates the table the tests' hooks write: each stream's last version, which must
// stay below 3.
func createMirror(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(testCtx(t), `CREATE TABLE mirror (stream text PRIMARY KEY, version bigint NOT NULL CHECK (version < 3))`); err != nil {
		t.Fatal(err)
	}
}

// mirrorHook writes the version of the last event appended to its stream's mirror row, after
// pausing the seconds pause gives for the stream ("" for none).
func mirrorHook(pause func(stream string) string) eventstore.StatementHook {
	return func(prepared []domain.Envelope) (string, []any, error) {
		last := prepared[len(prepared)-1]
		from := ""
		if p := pause(last.StreamID); p != "" {
			from = "FROM pg_sleep(" + p + ")"
		}
		return `INSERT INTO mirror (stream, version) SELECT $1::text, $2::bigint ` + from + ` WHERE EXISTS (SELECT 1 FROM appended)
			ON CONFLICT (stream) DO UPDATE SET version = EXCLUDED.version`, []any{last.StreamID, last.StreamVersion}, nil
	}
}
