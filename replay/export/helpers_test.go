package export_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/scenariotest"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/schemas"
	"github.com/imledger/imledger/internal/jsonschema"
	"github.com/imledger/imledger/internal/testenv"
)

// env is an event store and a Redis key prefix of the test's own.
type env struct {
	ctx   context.Context
	pool  *pgxpool.Pool
	store *eventstore.Store
	sc    scenariotest.Env
}

func newEnv(t *testing.T) *env {
	t.Helper()
	pool, store := storetest.EventStore(t, 16)
	rdb, prefix := testenv.Redis(t)
	return &env{ctx: testenv.Context(t), pool: pool, store: store,
		sc: scenariotest.Env{Store: store, Redis: rdb, KeyPrefix: prefix}}
}

// log reads every event of tenant (zero: all) from the store in position order, upcast as
// readers see them.
func (e *env) log(t *testing.T, tenant domain.TenantID) []domain.Envelope {
	t.Helper()
	var out []domain.Envelope
	var after int64
	for {
		page, err := e.store.ReadAll(e.ctx, eventstore.Filter{Tenant: tenant}, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Position
	}
}

// byID indexes envelopes by event id, failing on a repeat.
func byID(t *testing.T, what string, envs []domain.Envelope) map[string]domain.Envelope {
	t.Helper()
	out := make(map[string]domain.Envelope, len(envs))
	for _, e := range envs {
		id := e.EventID.String()
		if _, dup := out[id]; dup {
			t.Errorf("%s: event %s (%s) appears twice", what, id, e.EventType)
		}
		out[id] = e
	}
	return out
}

// readJSONL reads the envelopes of JSON Lines files, in order, validating each line against the
// envelope schema and its payload against its event type's schema.
func readJSONL(t *testing.T, files ...string) []domain.Envelope {
	t.Helper()
	var out []domain.Envelope
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		line := 0
		for sc.Scan() {
			line++
			validate(t, f, line, sc.Bytes())
			var e domain.Envelope
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("%s:%d: %v", f, line, err)
			}
			out = append(out, e)
		}
	}
	return out
}

var (
	schemaMu    sync.Mutex
	schemaCache = map[string]*jsonschema.Schema{}
)

func schemaOf(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if s, ok := schemaCache[name]; ok {
		return s
	}
	raw, err := schemas.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jsonschema.Compile(raw)
	if err != nil {
		t.Fatalf("schema %s: %v", name, err)
	}
	schemaCache[name] = s
	return s
}

// validate checks one JSON line against the envelope schema and its payload against the schema
// of its event type.
func validate(t *testing.T, file string, line int, raw []byte) {
	t.Helper()
	if err := schemaOf(t, schemas.Envelope).Validate(raw); err != nil {
		t.Errorf("%s:%d: envelope: %v", filepath.Base(file), line, err)
	}
	var e struct {
		EventType string          `json:"event_type"`
		Payload   json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	if err := schemaOf(t, e.EventType).Validate(e.Payload); err != nil {
		t.Errorf("%s:%d: payload of %s: %v", filepath.Base(file), line, e.EventType, err)
	}
}

// sameEnvelope reports how got differs from want, field by field; payloads compare as JSON.
func sameEnvelope(want, got domain.Envelope) []string {
	var diffs []string
	wp, gp := want.Payload, got.Payload
	want.Payload, got.Payload = nil, nil
	want.OccurredAt, got.OccurredAt = want.OccurredAt.UTC(), got.OccurredAt.UTC()
	if !reflect.DeepEqual(want, got) {
		diffs = append(diffs, "envelope fields")
	}
	var a, b any
	if json.Unmarshal(wp, &a) != nil || json.Unmarshal(gp, &b) != nil || !reflect.DeepEqual(a, b) {
		diffs = append(diffs, "payload "+string(gp)+" != "+string(wp))
	}
	return diffs
}

func eventIDs(envs []domain.Envelope) []string {
	out := make([]string, len(envs))
	for i, e := range envs {
		out[i] = e.EventID.String()
	}
	sort.Strings(out)
	return out
}

// glob lists the files of dir matching pattern, sorted.
func glob(t *testing.T, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

// settle waits until every event in the store is below the commit horizon, so an export sees all
// of them. The horizon is cluster-wide: a transaction of another test (or of anything else on this
// PostgreSQL) that is still running holds it back, and an export then stops before it, as the
// relay does.
func (e *env) settle(t *testing.T) {
	t.Helper()
	var last uint64
	if err := e.pool.QueryRow(e.ctx, `SELECT coalesce(max(tx_id)::text::bigint, 0) FROM events`).Scan(&last); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		h, err := e.store.Horizon(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h > last {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the commit horizon stayed at %d, not past the last event's transaction %d: a transaction of this PostgreSQL cluster has been running for 30 s", h, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
