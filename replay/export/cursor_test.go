package export_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/replay/export"
)

// sentEvent builds message seq of topic as the send path stores it.
func sentEvent(t *testing.T, tenant domain.TenantID, topic string, seq int64) domain.Envelope {
	t.Helper()
	env, err := domain.NewEnvelope(tenant, topic, seq, domain.EventGroupMessageSent, domain.Actor{Type: domain.ActorUser, ID: "1"},
		domain.MessageSent{MessageID: topic + "-" + strconv.FormatInt(seq, 10), Topic: topic, Seq: seq, From: 1,
			ClientMsgID: "c" + strconv.FormatInt(seq, 10), MsgType: domain.MsgText, Content: json.RawMessage(`"x"`), SentAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// insertIn appends env inside tx, which the caller commits.
func insertIn(ctx context.Context, t *testing.T, tx pgx.Tx, env domain.Envelope) {
	t.Helper()
	_, err := tx.Exec(ctx, `INSERT INTO events (event_id, tenant_id, stream_id, stream_version, event_type, version,
		occurred_at, payload, actor_type, actor_id, biz_type, source_service) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		env.EventID, env.TenantID.String(), env.StreamID, env.StreamVersion, string(env.EventType), env.Version, env.OccurredAt,
		[]byte(env.Payload), env.Actor.Type, env.Actor.ID, env.BizType, env.SourceService)
	if err != nil {
		t.Fatal(err)
	}
}

// Exports resumed from their cursor while writers commit, some transactions committing out of
// the order they took their ids and positions in, add up to the log: every event once.
func TestResumedExportsSeeEveryEventOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir() + "/stream/"

	// An old transaction: it takes its id now, writes later and commits after an export ran.
	early, err := e.pool.Begin(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Rollback(e.ctx)
	var earlyID uint64
	if err := early.QueryRow(e.ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&earlyID); err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopWriters := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopWriters() // also when the test fails early: no writer may outlive it
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			topic := "grp" + strconv.Itoa(w+1)
			for seq := int64(1); ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				batch := []domain.Envelope{sentEvent(t, tenantA, topic, seq)}
				if seq%3 == 0 { // a multi-event transaction now and then
					seq++
					batch = append(batch, sentEvent(t, tenantA, topic, seq))
				}
				if _, err := e.store.Append(e.ctx, tenantA, topic, batch[0].StreamVersion-1, batch); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}

	var results []export.Result
	runExport := func() {
		t.Helper()
		res, err := export.Run(e.ctx, e.store, export.Config{Out: dir, Tenant: tenantA, PartEvents: 50, PageSize: 16, ChunkEvents: 5, Readers: 3})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(results); n > 0 && res.Cursor.Before(results[n-1].Cursor) {
			t.Errorf("export %d ended at %s, before the previous one's %s", n+1, res.Cursor, results[n-1].Cursor)
		}
		results = append(results, res)
	}
	var late pgx.Tx
	for i := range 8 {
		time.Sleep(40 * time.Millisecond)
		runExport()
		switch i {
		case 1:
			if results[i].Cursor.TxID > earlyID {
				t.Fatalf("export %d ended at %s, past the transaction %d that is still running", i+1, results[i].Cursor, earlyID)
			}
			insertIn(e.ctx, t, early, sentEvent(t, tenantA, "grp90", 1)) // a position above many exported events
			// A transaction that takes its id after the others wrote and commits in a moment.
			if late, err = e.pool.Begin(e.ctx); err != nil {
				t.Fatal(err)
			}
			insertIn(e.ctx, t, late, sentEvent(t, tenantA, "grp91", 1))
		case 3:
			if err := late.Commit(e.ctx); err != nil {
				t.Fatal(err)
			}
		case 5:
			if err := early.Commit(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	stopWriters()
	e.settle(t)
	runExport()

	var lines []domain.Envelope
	var files []string
	for _, r := range results {
		files = append(files, r.Files...)
	}
	if parts := glob(t, dir, "part-*.jsonl"); strings.Join(parts, ",") != strings.Join(files, ",") {
		t.Fatalf("the directory holds %v, the exports reported %v", parts, files)
	}
	lines = readJSONL(t, files...)
	want := e.log(t, tenantA)
	got := byID(t, "exports", lines)
	for _, w := range want {
		if _, ok := got[w.EventID.String()]; !ok {
			t.Errorf("event %s (%s v%d) was never exported", w.EventID, w.StreamID, w.StreamVersion)
		}
	}
	if len(lines) != len(want) || len(want) < 100 {
		t.Errorf("%d lines exported for %d events in the log", len(lines), len(want))
	}
	// The directory's cursor is the last export's; an export from it finds nothing new.
	final := results[len(results)-1]
	if c, ok, err := export.SavedCursor(dir); err != nil || !ok || c != final.Cursor {
		t.Errorf("saved cursor %s %v %v, want %s", c, ok, err, final.Cursor)
	}
	again, err := export.Run(e.ctx, e.store, export.Config{Out: dir, Tenant: tenantA})
	if err != nil || again.Events != 0 || len(again.Files) != 0 {
		t.Errorf("an export after the last one wrote %d events to %v (%v), want none", again.Events, again.Files, err)
	}
}

// A half-done commit (the cursor written to .next, the file not renamed) is dropped; one whose
// file was renamed is completed. Either way the cursor matches the files.
func TestInterruptedCommitKeepsCursorAndFilesTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for seq := int64(1); seq <= 5; seq++ {
		env := sentEvent(t, tenantA, "grp1", seq)
		if _, err := e.store.Append(e.ctx, tenantA, "grp1", seq-1, []domain.Envelope{env}); err != nil {
			t.Fatal(err)
		}
	}
	e.settle(t)
	dir := t.TempDir()
	first, err := export.Run(e.ctx, e.store, export.Config{Out: dir + "/", Tenant: tenantA})
	if err != nil || first.Events != 5 {
		t.Fatalf("first export: %d events, %v", first.Events, err)
	}
	// A crash after the cursor's .next but before the part's rename: the part is still a .tmp.
	bogus := eventstore.Cursor{TxID: first.Cursor.TxID + 1000, Position: 1}
	writeFile(t, dir+"/cursor.next", bogus.String()+"\npart-000001.jsonl\n1 1\n")
	writeFile(t, dir+"/part-000001.jsonl.tmp", "partial")
	if c, _, err := export.SavedCursor(dir); err != nil || c != first.Cursor {
		t.Fatalf("after an interrupted commit the cursor is %s (%v), want %s", c, err, first.Cursor)
	}
	next, err := export.Run(e.ctx, e.store, export.Config{Out: dir, Tenant: tenantA})
	if err != nil || next.Events != 0 {
		t.Fatalf("resumed export: %d events, %v", next.Events, err)
	}
}

// A .next the export was stopped while writing (empty, or cut short) was never complete, so no
// file was renamed after it: it is dropped and the cursor before it stays.
func TestAnUnfinishedCursorNextKeepsTheCursor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for seq := int64(1); seq <= 3; seq++ {
		env := sentEvent(t, tenantA, "grp1", seq)
		if _, err := e.store.Append(e.ctx, tenantA, "grp1", seq-1, []domain.Envelope{env}); err != nil {
			t.Fatal(err)
		}
	}
	e.settle(t)
	dir := t.TempDir()
	first, err := export.Run(e.ctx, e.store, export.Config{Out: dir + "/", Tenant: tenantA})
	if err != nil || first.Events != 3 {
		t.Fatalf("first export: %d events, %v", first.Events, err)
	}
	whole := eventstore.Cursor{TxID: first.Cursor.TxID + 1000, Position: 12}.String() + "\npart-000001.jsonl\n1 1\n"
	want := first.Cursor
	for _, partial := range []string{"", whole[:3], whole[:len(whole)-len("2\npart-000001.jsonl\n1 1\n")]} {
		writeFile(t, dir+"/cursor.next", partial)
		if c, ok, err := export.SavedCursor(dir); err != nil || !ok || c != want {
			t.Fatalf("after a .next cut to %q the cursor is %s %v (%v), want %s", partial, c, ok, err, want)
		}
		writeFile(t, dir+"/cursor.next", partial)
		next, err := export.Run(e.ctx, e.store, export.Config{Out: dir, Tenant: tenantA})
		if err != nil || next.Events != 0 {
			t.Fatalf("resumed export after a .next cut to %q: %d events, %v", partial, next.Events, err)
		}
		want = next.Cursor
	}
}

// A cursor past the end of the log (edited, or from another database) is refused, whether it is
// given or saved in the directory, and nothing is written: an export from it would find nothing,
// save it, and every later export would skip the events written until the log reached it.
func TestACursorPastTheLogIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	env := sentEvent(t, tenantA, "grp1", 1)
	if _, err := e.store.Append(e.ctx, tenantA, "grp1", 0, []domain.Envelope{env}); err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	h, err := e.store.Horizon(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	ahead := eventstore.Cursor{TxID: h + 1_000_000, Position: 1}
	file := filepath.Join(t.TempDir(), "out.jsonl")
	if _, err := export.Run(e.ctx, e.store, export.Config{Out: file, From: ahead}); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("an export from %s (horizon %d): %v, want an invalid cursor", ahead, h, err)
	}
	if got := glob(t, filepath.Dir(file), "*"); len(got) != 0 {
		t.Errorf("the refused export left %v, want nothing", got)
	}
	// A directory the export would create is not created either.
	newDir := filepath.Join(t.TempDir(), "new") + "/"
	if _, err := export.Run(e.ctx, e.store, export.Config{Out: newDir, From: ahead}); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("an export into a new directory from %s (horizon %d): %v, want an invalid cursor", ahead, h, err)
	}
	if _, err := os.Stat(newDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused export created %s (%v)", newDir, err)
	}
	dir := t.TempDir()
	writeFile(t, dir+"/cursor", ahead.String()+"\n\n")
	if _, err := export.Run(e.ctx, e.store, export.Config{Out: dir, Tenant: tenantA}); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("an export into a directory whose cursor is %s (horizon %d): %v, want an invalid cursor", ahead, h, err)
	}
	if c, _, err := export.SavedCursor(dir); err != nil || c != ahead {
		t.Errorf("the directory's cursor became %s (%v)", c, err)
	}
	// The horizon itself is where an export of everything ends: an export from it is fine.
	if res, err := export.Run(e.ctx, e.store, export.Config{Out: file, From: eventstore.HorizonCursor(h)}); err != nil || res.Events != 0 {
		t.Errorf("an export from the horizon: %d events, %v", res.Events, err)
	}
}

// gatedStore is the event store with every scan held until gate is closed: an export that is
// still running.
type gatedStore struct {
	*eventstore.Store
	started chan struct{}
	gate    chan struct{}
}

func (g gatedStore) ScanCommitted(ctx context.Context, r eventstore.Range, f eventstore.Filter, page int, fn func([]eventstore.Record) error) error {
	select {
	case g.started <- struct{}{}:
	default:
	}
	<-g.gate
	return g.Store.ScanCommitted(ctx, r, f, page, fn)
}

// A second export into a directory (or file) another export is still writing is refused before it
// touches anything: the two would resume from the same cursor, write the same part names and
// commit each other's cursor.
func TestAnExportIntoAnOutputInUseIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for seq := int64(1); seq <= 7; seq++ {
		env := sentEvent(t, tenantA, "grp1", seq)
		if _, err := e.store.Append(e.ctx, tenantA, "grp1", seq-1, []domain.Envelope{env}); err != nil {
			t.Fatal(err)
		}
	}
	e.settle(t)
	for _, out := range []string{t.TempDir() + "/", filepath.Join(t.TempDir(), "out.jsonl")} {
		g := gatedStore{Store: e.store, started: make(chan struct{}, 1), gate: make(chan struct{})}
		first := make(chan error, 1)
		go func() {
			_, err := export.Run(e.ctx, g, export.Config{Out: out, Tenant: tenantA, PartEvents: 3})
			first <- err
		}()
		<-g.started
		_, err := export.Run(e.ctx, e.store, export.Config{Out: out, Tenant: tenantA, PartEvents: 3})
		close(g.gate)
		if err == nil || !strings.Contains(err.Error(), "another export") {
			t.Errorf("%s: a second export while the first runs: %v, want a refusal", out, err)
		}
		if err := <-first; err != nil {
			t.Fatalf("%s: the first export: %v", out, err)
		}
		var files []string
		if strings.HasSuffix(out, "/") {
			files = glob(t, out, "part-*.jsonl")
		} else {
			files = []string{out}
		}
		if got := readJSONL(t, files...); len(got) != 7 {
			t.Errorf("%s holds %d events, want 7", out, len(got))
		}
	}
}

// A directory remembers the filters of the export that filled it: resuming it with others (a
// tenant, types or times the cursor was not reached with) is refused and writes nothing, since
// the cursor would skip every event of the new filters before it; the same filters resume, and a
// cursor file written before the filters were recorded resumes as before.
func TestResumeWithOtherFiltersIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for seq := int64(1); seq <= 4; seq++ {
		for _, tn := range []domain.TenantID{tenantA, tenantB} {
			env := sentEvent(t, tn, "grp1", seq)
			if _, err := e.store.Append(e.ctx, tn, "grp1", seq-1, []domain.Envelope{env}); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.settle(t)
	dir := t.TempDir() + "/"
	first, err := export.Run(e.ctx, e.store, export.Config{Out: dir, Tenant: tenantA, Types: []string{"message.*"}})
	if err != nil || first.Events != 4 {
		t.Fatalf("first export: %d events, %v", first.Events, err)
	}
	for _, cfg := range []export.Config{
		{Out: dir, Tenant: tenantB, Types: []string{"message.*"}},
		{Out: dir, Types: []string{"message.*"}},
		{Out: dir, Tenant: tenantA},
		{Out: dir, Tenant: tenantA, Types: []string{"message.*"}, Since: time.Now().Add(-time.Hour)},
	} {
		res, err := export.Run(e.ctx, e.store, cfg)
		if !errors.Is(err, domain.ErrInvalid) || !strings.Contains(err.Error(), "filters_differ") {
			t.Fatalf("resume with %+v: %d events, %v; want invalid filters_differ", cfg, res.Events, err)
		}
	}
	if c, _, err := export.SavedCursor(dir); err != nil || c != first.Cursor {
		t.Fatalf("cursor after the refusals %s (%v), want %s", c, err, first.Cursor)
	}
	if parts, _ := filepath.Glob(dir + "part-*"); len(parts) != 1 {
		t.Fatalf("parts after the refusals: %q, want the first export's one", parts)
	}
	// The same filters, in another order: resumed.
	for seq := int64(5); seq <= 6; seq++ {
		if _, err := e.store.Append(e.ctx, tenantA, "grp1", seq-1, []domain.Envelope{sentEvent(t, tenantA, "grp1", seq)}); err != nil {
			t.Fatal(err)
		}
	}
	e.settle(t)
	next, err := export.Run(e.ctx, e.store, export.Config{Out: dir, Tenant: tenantA, Types: []string{"message.*", "message.*"}})
	if err != nil || next.Events != 2 {
		t.Fatalf("resume with the same filters: %d events, %v; want the 2 new ones", next.Events, err)
	}
	// A cursor file without the filters line (written before they were recorded) resumes.
	writeFile(t, dir+"cursor", next.Cursor.String()+"\n\n")
	if last, err := export.Run(e.ctx, e.store, export.Config{Out: dir, Tenant: tenantB}); err != nil || last.Events != 0 {
		t.Fatalf("resume of an old cursor file: %d events, %v", last.Events, err)
	}
}

// A cursor file read to chain exports (--from-cursor FILE.cursor) of an export stopped between
// renaming its file and its cursor gives the cursor after that file, not the one before: the
// next export would write the file's events again.
func TestCursorFileOfAnUnfinishedCommitIsTheCommittedOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for seq := int64(1); seq <= 3; seq++ {
		if _, err := e.store.Append(e.ctx, tenantA, "grp1", seq-1, []domain.Envelope{sentEvent(t, tenantA, "grp1", seq)}); err != nil {
			t.Fatal(err)
		}
	}
	e.settle(t)
	dir := t.TempDir()
	first, err := export.Run(e.ctx, e.store, export.Config{Out: dir + "/a.jsonl", Tenant: tenantA})
	if err != nil || first.Events != 3 {
		t.Fatalf("first export: %d events, %v", first.Events, err)
	}
	// Stopped after renaming a.jsonl, before renaming a.jsonl.cursor.next over the cursor an
	// earlier export into a.jsonl left.
	committed, err := os.ReadFile(dir + "/a.jsonl.cursor")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir+"/a.jsonl.cursor.next", string(committed))
	writeFile(t, dir+"/a.jsonl.cursor", "0:0\n\n")
	if c, ok, err := export.ReadCursorFile(dir + "/a.jsonl.cursor"); err != nil || !ok || c != first.Cursor {
		t.Fatalf("cursor file of an unfinished commit: %s %v (%v), want the committed %s", c, ok, err, first.Cursor)
	}
	// A .next whose file was not renamed does not count.
	writeFile(t, dir+"/a.jsonl.cursor.next", first.Cursor.String()+"\nb.jsonl\n1 1\n")
	if c, _, err := export.ReadCursorFile(dir + "/a.jsonl.cursor"); err != nil || !c.IsZero() {
		t.Fatalf("cursor file beside a .next that claims no renamed file: %s (%v), want 0:0", c, err)
	}
}

// A start cursor given for a directory that holds an export must be the directory's own cursor
// and come with the same filters: any other would write its events again (an earlier cursor) or
// leave a gap (a later one), and other filters would be recorded as if the directory held them
// from the start. Such an export is refused and changes nothing; the directory's own cursor
// given explicitly resumes it.
func TestAGivenCursorMustResumeTheDirectory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for seq := int64(1); seq <= 3; seq++ {
		for _, tn := range []domain.TenantID{tenantA, tenantB} {
			if _, err := e.store.Append(e.ctx, tn, "grp1", seq-1, []domain.Envelope{sentEvent(t, tn, "grp1", seq)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.settle(t)
	dir := t.TempDir() + "/"
	first, err := export.Run(e.ctx, e.store, export.Config{Out: dir, Tenant: tenantA})
	if err != nil || first.Events != 3 {
		t.Fatalf("first export: %d events, %v", first.Events, err)
	}
	for _, cfg := range []export.Config{
		{Out: dir, Tenant: tenantB, From: first.Cursor},
		{Out: dir, Tenant: tenantA, From: eventstore.Cursor{TxID: 1}},
	} {
		res, err := export.Run(e.ctx, e.store, cfg)
		if !errors.Is(err, domain.ErrInvalid) || res.Events != 0 {
			t.Errorf("export of tenant %s from %s into a directory at %s: %d events, %v; want a refusal",
				cfg.Tenant, cfg.From, first.Cursor, res.Events, err)
		}
	}
	if c, _, err := export.SavedCursor(dir); err != nil || c != first.Cursor {
		t.Errorf("cursor after the refusals %s (%v), want %s", c, err, first.Cursor)
	}
	if parts := glob(t, dir, "part-*"); len(parts) != 1 {
		t.Errorf("parts after the refusals: %q, want the first export's one", parts)
	}
	if res, err := export.Run(e.ctx, e.store, export.Config{Out: dir, Tenant: tenantA, From: first.Cursor}); err != nil || res.Events != 0 {
		t.Errorf("export from the directory's own cursor: %d events, %v", res.Events, err)
	}
}

// A directory holds one format: resuming it in another is refused and writes nothing, since the
// new parts would hold only the events after the cursor and a reader of that format
// (read_parquet('dir/part-*.parquet')) would miss the earlier ones without a word.
func TestResumeInAnotherFormatIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for seq := int64(1); seq <= 3; seq++ {
		if _, err := e.store.Append(e.ctx, tenantA, "grp1", seq-1, []domain.Envelope{sentEvent(t, tenantA, "grp1", seq)}); err != nil {
			t.Fatal(err)
		}
	}
	e.settle(t)
	dir := t.TempDir() + "/"
	first, err := export.Run(e.ctx, e.store, export.Config{Out: dir, Tenant: tenantA})
	if err != nil || first.Events != 3 {
		t.Fatalf("first export: %d events, %v", first.Events, err)
	}
	if _, err := e.store.Append(e.ctx, tenantA, "grp1", 3, []domain.Envelope{sentEvent(t, tenantA, "grp1", 4)}); err != nil {
		t.Fatal(err)
	}
	e.settle(t)
	res, err := export.Run(e.ctx, e.store, export.Config{Out: dir, Tenant: tenantA, Format: export.FormatParquet})
	if !errors.Is(err, domain.ErrInvalid) || res.Events != 0 {
		t.Errorf("a Parquet export into a directory of JSON Lines: %d events, %v; want a refusal", res.Events, err)
	}
	if got := glob(t, dir, "part-*"); len(got) != 1 || !strings.HasSuffix(got[0], ".jsonl") {
		t.Errorf("parts after the refusal: %q, want the first export's one", got)
	}
	if c, _, err := export.SavedCursor(dir); err != nil || c != first.Cursor {
		t.Errorf("cursor after the refusal %s (%v), want %s", c, err, first.Cursor)
	}
	if next, err := export.Run(e.ctx, e.store, export.Config{Out: dir, Tenant: tenantA}); err != nil || next.Events != 1 {
		t.Errorf("resume in the directory's format: %d events, %v; want the new one", next.Events, err)
	}
}
