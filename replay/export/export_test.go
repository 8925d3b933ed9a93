package export_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/scenariotest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/replay/export"
)

var (
	tenantA = domain.MustTenantID("acme")
	tenantB = domain.MustTenantID("globex")
)

// Events written through the commands come back from a Parquet export once each, with every
// envelope field as stored (old versions upcast) and the message columns filled.
func TestParquetExportRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := scenariotest.Write(e.ctx, t, e.sc, tenantA, 12)
	scenariotest.Write(e.ctx, t, e.sc, tenantB, 3)
	v1 := scenariotest.AppendMutedV1(e.ctx, t, e.store, tenantA, res.Group, scenariotest.Member, scenariotest.Owner, time.Time{})
	out := filepath.Join(t.TempDir(), "acme.parquet")
	e.settle(t)

	got, err := export.Run(e.ctx, e.store, export.Config{Format: export.FormatParquet, Out: out, Tenant: tenantA, PageSize: 7, ChunkEvents: 11, Readers: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := e.log(t, tenantA)
	if got.Events != int64(len(want)) || len(got.Files) != 1 || got.Files[0] != out {
		t.Fatalf("exported %d events to %v, want %d to %s", got.Events, got.Files, len(want), out)
	}
	rows, err := parquet.ReadFile[export.Row](out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	wantByID := byID(t, "log", want)
	seen := map[uuid.UUID]bool{}
	var prev eventstore.Cursor
	types := map[domain.EventType]int{}
	for i, r := range rows {
		if seen[r.EventID] {
			t.Fatalf("row %d: event %s twice", i, r.EventID)
		}
		seen[r.EventID] = true
		cur := eventstore.Cursor{TxID: uint64(r.TxID), Position: r.Position}
		if i > 0 && !prev.Before(cur) {
			t.Errorf("row %d at %s is not after %s: rows must be in commit-safe order", i, cur, prev)
		}
		prev = cur
		w, ok := wantByID[r.EventID.String()]
		if !ok {
			t.Fatalf("row %d: event %s is not in tenant %s's log", i, r.EventID, tenantA)
		}
		types[w.EventType]++
		if d := sameEnvelope(w, envelopeOf(t, r)); len(d) > 0 {
			t.Errorf("row %d (%s): %v", i, w.EventType, d)
		}
		checkMessageColumns(t, w, r)
	}
	for _, typ := range []domain.EventType{domain.EventGroupMessageSent, domain.EventDirectMessageSent, domain.EventGroupMessageEdited,
		domain.EventGroupMessageRecalled, domain.EventGroupMessageDeleted, domain.EventGroupReadMarked, domain.EventGroupCreated,
		domain.EventMemberJoined, domain.EventMemberMuted, domain.EventFriendAccepted, domain.EventSessionClosed} {
		if types[typ] == 0 {
			t.Errorf("the export has no %s event; the scenario should have written one", typ)
		}
	}
	for _, r := range rows {
		if r.EventID == v1.EventID {
			var p domain.MemberMuted
			if r.EventType != string(domain.EventMemberMuted) || r.Version != 2 || json.Unmarshal([]byte(r.Payload), &p) != nil || p.Muted {
				t.Errorf("the stored v1 lift came out as %s version %d %s, want member.muted.v2 with muted false", r.EventType, r.Version, r.Payload)
			}
		}
	}
	if c, ok, err := export.ReadCursorFile(out + ".cursor"); err != nil || !ok || c != got.Cursor {
		t.Errorf("cursor file: %v %v %v, want %s", c, ok, err, got.Cursor)
	}
	if _, err := os.Stat(out + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temporary file was left behind: %v", err)
	}
}

// envelopeOf turns a Parquet row back into an envelope.
func envelopeOf(t *testing.T, r export.Row) domain.Envelope {
	t.Helper()
	e := domain.Envelope{EventID: r.EventID, TraceID: r.TraceID, CorrelationID: r.CorrelationID, CausationID: r.CausationID,
		TenantID: domain.MustTenantID(r.TenantID), SourceService: r.SourceService, TargetService: r.TargetService,
		EventType: domain.EventType(r.EventType), BizType: r.BizType, BizID: r.BizID, Version: int(r.Version),
		OccurredAt: r.OccurredAt, Actor: domain.Actor{Type: r.ActorType, ID: r.ActorID}, StreamID: r.StreamID,
		StreamVersion: r.StreamVersion, Position: r.Position, Payload: json.RawMessage(r.Payload)}
	if r.ParentEventID != nil {
		id := uuid.MustParse(*r.ParentEventID)
		e.ParentEventID = &id
	}
	if r.IdempotencyKey != nil {
		e.IdempotencyKey = *r.IdempotencyKey
	}
	if r.ActorKeyID != nil {
		e.Actor.KeyID = *r.ActorKeyID
	}
	return e
}

func checkMessageColumns(t *testing.T, w domain.Envelope, r export.Row) {
	t.Helper()
	switch w.EventType {
	case domain.EventGroupMessageSent, domain.EventDirectMessageSent:
		var p domain.MessageSent
		if err := w.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if r.Topic == nil || *r.Topic != p.Topic || r.Seq == nil || *r.Seq != p.Seq || r.From == nil || *r.From != p.From.Int64() ||
			r.MsgType == nil || *r.MsgType != string(p.MsgType) || r.SentAt == nil || !r.SentAt.Equal(p.SentAt.Truncate(time.Microsecond)) {
			t.Errorf("%s seq %d: message columns %v %v %v %v %v", w.EventType, p.Seq, r.Topic, r.Seq, r.From, r.MsgType, r.SentAt)
		}
	case domain.EventGroupMessageRecalled, domain.EventGroupMessageEdited:
		if r.Topic == nil || r.Seq == nil || r.From != nil || r.SentAt != nil {
			t.Errorf("%s: message columns topic %v seq %v from %v sent_at %v", w.EventType, r.Topic, r.Seq, r.From, r.SentAt)
		}
	case domain.EventGroupCreated, domain.EventSessionOpened, domain.EventMemberMuted:
		if r.Topic != nil || r.Seq != nil || r.From != nil || r.MsgType != nil || r.SentAt != nil {
			t.Errorf("%s: message columns set on an event that is no message", w.EventType)
		}
	}
}

// A JSON Lines export into a directory rotates parts, and every line validates against the
// envelope schema and its payload against its event type's schema, upcast or as stored.
func TestJSONLExportValidatesAgainstTheSchemas(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := scenariotest.Write(e.ctx, t, e.sc, tenantA, 10)
	v1 := scenariotest.AppendMutedV1(e.ctx, t, e.store, tenantA, res.Group, scenariotest.Member, scenariotest.Owner, time.Time{})
	want := e.log(t, tenantA)
	e.settle(t)

	for _, asStored := range []bool{false, true} {
		dir := t.TempDir() + "/out/"
		got, err := export.Run(e.ctx, e.store, export.Config{Out: dir, Tenant: tenantA, PartEvents: 7, AsStored: asStored})
		if err != nil {
			t.Fatal(err)
		}
		parts := glob(t, dir, "part-*.jsonl")
		if wantParts := (len(want) + 6) / 7; len(parts) != wantParts || len(got.Files) != wantParts {
			t.Fatalf("as stored %v: %d parts (%d reported), want %d of at most 7 events", asStored, len(parts), len(got.Files), wantParts)
		}
		lines := readJSONL(t, parts...)
		if strings.Join(eventIDs(lines), ",") != strings.Join(eventIDs(want), ",") {
			t.Fatalf("as stored %v: the export holds %d events, the log %d, or other ones", asStored, len(lines), len(want))
		}
		wantByID := byID(t, "log", want)
		last := map[string]int64{}
		for i, l := range lines {
			if v := last[l.StreamID]; l.StreamVersion <= v {
				t.Errorf("line %d: %s version %d after %d: a stream must stay in order", i+1, l.StreamID, l.StreamVersion, v)
			}
			last[l.StreamID] = l.StreamVersion
			w := wantByID[l.EventID.String()]
			if l.EventID == v1.EventID {
				if asStored && (l.EventType != domain.EventMemberMutedV1 || l.Version != 1) {
					t.Errorf("as stored: the v1 event came out as %s version %d", l.EventType, l.Version)
				}
				if !asStored && (l.EventType != domain.EventMemberMuted || l.Version != 2) {
					t.Errorf("upcast: the v1 event came out as %s version %d", l.EventType, l.Version)
				}
				continue
			}
			if d := sameEnvelope(w, l); len(d) > 0 {
				t.Errorf("line %d (%s): %v", i+1, w.EventType, d)
			}
		}
		if c, ok, err := export.ReadCursorFile(filepath.Join(dir, "cursor")); err != nil || !ok || c != got.Cursor {
			t.Errorf("cursor file: %v %v %v, want %s", c, ok, err, got.Cursor)
		}
	}
}

// Filters narrow by tenant, type glob and time; stdout takes JSON Lines.
func TestExportFilters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	scenariotest.Write(e.ctx, t, e.sc, tenantA, 5)
	mid := time.Now().UTC()
	time.Sleep(10 * time.Millisecond)
	scenariotest.Write(e.ctx, t, e.sc, tenantB, 4)
	all := e.log(t, domain.TenantID{})
	e.settle(t)

	run := func(cfg export.Config) []domain.Envelope {
		t.Helper()
		var buf bytes.Buffer
		cfg.Out, cfg.Stdout = export.Stdout, &buf
		if _, err := export.Run(e.ctx, e.store, cfg); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "out.jsonl")
		if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return readJSONL(t, f)
	}
	keep := func(ok func(domain.Envelope) bool) []domain.Envelope {
		var out []domain.Envelope
		for _, ev := range all {
			if ok(ev) {
				out = append(out, ev)
			}
		}
		return out
	}
	for name, c := range map[string]struct {
		cfg  export.Config
		want []domain.Envelope
	}{
		"all tenants": {export.Config{}, all},
		"one tenant":  {export.Config{Tenant: tenantB}, keep(func(ev domain.Envelope) bool { return ev.TenantID == tenantB })},
		"group messages of a tenant": {export.Config{Tenant: tenantA, Types: []string{"message.group.*"}},
			keep(func(ev domain.Envelope) bool {
				return ev.TenantID == tenantA && strings.HasPrefix(string(ev.EventType), "message.group.")
			})},
		"two globs": {export.Config{Types: []string{"session.*", "member.muted.v2"}},
			keep(func(ev domain.Envelope) bool {
				return strings.HasPrefix(string(ev.EventType), "session.") || ev.EventType == domain.EventMemberMuted
			})},
		"since": {export.Config{Since: mid}, keep(func(ev domain.Envelope) bool { return !ev.OccurredAt.Before(mid) })},
		"until": {export.Config{Until: mid}, keep(func(ev domain.Envelope) bool { return ev.OccurredAt.Before(mid) })},
	} {
		got := run(c.cfg)
		if len(c.want) == 0 || strings.Join(eventIDs(got), ",") != strings.Join(eventIDs(c.want), ",") {
			t.Errorf("%s: %d events, want %d (and those)", name, len(got), len(c.want))
		}
	}
	if _, err := export.Run(e.ctx, e.store, export.Config{Out: export.Stdout, Stdout: &bytes.Buffer{}, Types: []string{"nothing.*"}}); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("a glob matching no type: %v, want ErrInvalid", err)
	}
	if _, err := export.Run(e.ctx, e.store, export.Config{Format: export.FormatParquet, Out: export.Stdout, Stdout: &bytes.Buffer{}}); err == nil {
		t.Error("Parquet to stdout was accepted")
	}
}
