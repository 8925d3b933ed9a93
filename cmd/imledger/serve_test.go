package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/internal/testenv"
)

// TestServeEmbeddedKafka runs the local demo: no Kafka brokers and no auth keys, so serve starts
// its own broker and signs tokens with a random key. A registered user creates a group, sends
// to it and the relay publishes the message.
func TestServeEmbeddedKafka(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, nil, false)
	s := env.start(t, "solo")
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(s.stdout.String(), "chat page at "+s.base+"/ (tenant demo)"); {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not print the chat page's URL: %q", s.stdout.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := get(t, s.base+"/"); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Errorf("chat page: %d", code)
	}
	alice := signUp(t, s.base, "alice")
	topic := "grp" + createGroup(t, s.base, alice, "embedded")
	if a := sendREST(t, s.base, alice, topic, "e-1", `"hi"`); a.status != http.StatusCreated || a.Data["seq"] != "1" {
		t.Fatalf("send: %d %s", a.status, a.raw)
	}
	waitMetric(t, s.base, `imledger_relay_events_total{relay="default",topic="im.group.message.persist"} 1`)
	if err := s.stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}

func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	env := newServeEnv(t, brokers, true)
	s := env.start(t, "e2e")
	base := s.base

	alice := signUp(t, base, "alice")
	gid := createGroup(t, base, alice, "e2e")
	topic := "grp" + gid
	first := sendREST(t, base, alice, topic, "m-1", `"hello"`)
	if first.status != http.StatusCreated || first.Data["seq"] != "1" {
		t.Fatalf("first send: %d %s", first.status, first.raw)
	}
	// The same client_msg_id under another Idempotency-Key is the send handler's duplicate.
	again := call(t, http.MethodPost, base+"/v1/im/topics/"+topic+"/messages", alice.token, "other-key",
		`{"client_msg_id":"m-1","content":"hello"}`)
	if again.status != http.StatusOK || again.Data["seq"] != "1" || again.Data["duplicate"] != true ||
		again.Data["message_id"] != first.Data["message_id"] {
		t.Fatalf("repeated send: %d %s", again.status, again.raw)
	}
	bad := sendREST(t, base, alice, topic, "", `"hello"`)
	if bad.status != http.StatusBadRequest || bad.Reason != "invalid" || bad.Details["field"] != "client_msg_id" || bad.Details["reason"] != "required" {
		t.Fatalf("bad send: %d %s", bad.status, bad.raw)
	}
	if a := call(t, http.MethodPost, base+"/v1/im/topics/"+topic+"/messages", "", "k", `{"client_msg_id":"x","content":"x"}`); a.status != http.StatusUnauthorized {
		t.Errorf("send without a token: %d %s", a.status, a.raw)
	}
	if a := call(t, http.MethodPost, base+"/v1/im/topics/"+topic+"/messages", alice.token, "", `{"client_msg_id":"x","content":"x"}`); a.status != http.StatusBadRequest || a.Reason != "idempotency_key_required" {
		t.Errorf("send without an Idempotency-Key: %d %s", a.status, a.raw)
	}
	outsider := signUp(t, base, "mallory")
	if a := sendREST(t, base, outsider, topic, "o-1", `"let me in"`); a.status != http.StatusForbidden || a.Reason != "not_member" {
		t.Errorf("send by a non-member: %d %s", a.status, a.raw)
	}

	code, body := get(t, base+"/readyz")
	for _, dep := range []string{`"postgres":"ok"`, `"redis":"ok"`, `"kafka":"ok"`, `"mysql":"ok"`} {
		if code != http.StatusOK || !strings.Contains(body, dep) {
			t.Errorf("readyz: %d %s, want %s", code, body, dep)
		}
	}
	code, body = get(t, base+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, `imledger_http_requests_total{code="201",method="POST",route="POST /v1/im/topics/{topic}/messages"} 1`) {
		t.Errorf("metrics do not count the send: %d", code)
	}
	if code, _ := get(t, base+"/openapi.json"); code != http.StatusOK {
		t.Errorf("openapi.json: %d", code)
	}
	// Unknown routes and methods answer the envelope and count under one route label; the API
	// page is served; labelled series exist before their first event.
	if code, body := get(t, base+"/no/such/route"); code != http.StatusNotFound || !strings.HasPrefix(body, `{"code":404,"reason":"not_found"`) {
		t.Errorf("unknown route: %d %s", code, body)
	}
	if a := call(t, http.MethodPut, base+"/readyz", "", "", ""); a.status != http.StatusMethodNotAllowed || a.Reason != "method_not_allowed" {
		t.Errorf("PUT /readyz: %d %s", a.status, a.raw)
	}
	if code, body := get(t, base+"/docs"); code != http.StatusOK || !strings.Contains(body, `id="send-message"`) {
		t.Errorf("the API page: %d", code)
	}
	_, body = get(t, base+"/metrics")
	for _, line := range []string{`imledger_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`imledger_http_requests_total{code="405",method="PUT",route="unmatched"} 1`,
		`imledger_panics_total{component="rest"} 0`, `imledger_presence_redis_errors_total{op="get"} 0`,
		`imledger_fanout_dropped_total{reason="queue_full"} 0`, `imledger_ws_disconnects_total{cause="slow_consumer"} 0`} {
		if !strings.Contains(body, line) {
			t.Errorf("metrics lack %s", line)
		}
	}
	// The same Idempotency-Key and body get the stored answer back verbatim.
	replay := sendREST(t, base, alice, topic, "m-1", `"hello"`)
	if replay.status != http.StatusCreated || replay.raw != first.raw || replay.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replayed send: %d %s (first %s)", replay.status, replay.raw, first.raw)
	}
	checkHistory(t, base, alice, topic, 1)

	// The relay publishes the one committed message, keyed by conversation, under the prefix.
	recs := consume(t, brokers, "e2e.im.group.message.persist", 1)
	r := recs[0]
	headers := map[string]string{}
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	if string(r.Key) != "demo:"+topic || headers["event_id"] != first.Data["message_id"] || headers["stream_version"] != "1" {
		t.Errorf("published record: key %q headers %v, want key demo:%s, event_id %v", r.Key, headers, topic, first.Data["message_id"])
	}

	if err := s.stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("HTTP still answers after shutdown")
	}
	checkStored(t, env.dbURL, topic)
}

// checkHistory polls the REST history of topic until the projectors wrote want messages.
func checkHistory(t *testing.T, base string, u user, topic string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := call(t, http.MethodGet, base+"/v1/im/topics/"+topic+"/messages?after_seq=0", u.token, "", "")
		msgs, _ := a.Data["messages"].([]any)
		if a.status == http.StatusOK && len(msgs) == want && a.Data["last_seq"] == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("history of %s never held %d messages: %d %s", topic, want, a.status, a.raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkStored checks after shutdown that the event store holds the one accepted send of topic and
// that the relay saved its checkpoint.
func checkStored(t *testing.T, dbURL, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	var version int64
	if err := conn.QueryRow(ctx, "SELECT count(*), max(stream_version) FROM events WHERE tenant_id = 'demo' AND stream_id = $1", topic).Scan(&n, &version); err != nil {
		t.Fatal(err)
	}
	if n != 1 || version != 1 {
		t.Fatalf("events in %s: %d (max version %d), want exactly the one accepted send", topic, n, version)
	}
	var checkpoint int64
	if err := conn.QueryRow(ctx, "SELECT position FROM relay_checkpoints WHERE name = 'default'").Scan(&checkpoint); err != nil || checkpoint < 1 {
		t.Fatalf("relay checkpoint after shutdown: %d, %v", checkpoint, err)
	}
}

// consume reads want records of topic from the start and fails after 20 s.
func consume(t *testing.T, brokers []string, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records from %s", len(recs), want, topic)
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	return recs
}

// TestServeShutdownKeepsEveryAcknowledgedSend stops the node while clients are sending: every
// send answered 201 must be in the event store, and no request may fail with a server error.
func TestServeShutdownKeepsEveryAcknowledgedSend(t *testing.T) {
	t.Parallel()
	env := newServeEnv(t, nil, false)
	s := env.start(t, "shutdown")
	senders := make([]user, 8)
	for i := range senders {
		senders[i] = signUp(t, s.base, fmt.Sprintf("sender%d", i))
	}
	topics := make([]string, 3)
	for g := range topics {
		gid := createGroup(t, s.base, senders[0], fmt.Sprintf("g%d", g))
		topics[g] = "grp" + gid
		for i := g; i < len(senders); i += len(topics) {
			if i != 0 {
				joinGroup(t, s.base, senders[i], gid)
			}
		}
	}
	type ack struct{ id, status string }
	acks := make(chan ack, 100000)
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 15 * time.Second}
	for i, u := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				cmid := fmt.Sprintf("s%d-%d", i, k)
				req, _ := http.NewRequest(http.MethodPost, s.base+"/v1/im/topics/"+topics[i%len(topics)]+"/messages",
					strings.NewReader(fmt.Sprintf(`{"client_msg_id":%q,"content":"x"}`, cmid)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+u.token)
				req.Header.Set("Idempotency-Key", cmid)
				resp, err := client.Do(req)
				if err != nil {
					return // the listener is closed
				}
				var env struct {
					Data struct {
						MessageID string `json:"message_id"`
					} `json:"data"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&env)
				resp.Body.Close()
				acks <- ack{id: env.Data.MessageID, status: fmt.Sprint(resp.StatusCode)}
			}
		}()
	}
	time.Sleep(400 * time.Millisecond)
	if err := s.stop(); err != nil {
		t.Fatalf("graceful stop under load: %v", err)
	}
	wg.Wait()
	close(acks)
	var ids []string
	for a := range acks {
		if a.status != "201" {
			t.Errorf("a send during shutdown got %s", a.status)
			continue
		}
		ids = append(ids, a.id)
	}
	if len(ids) == 0 {
		t.Fatal("no send was acknowledged before shutdown; the test proves nothing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, env.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var stored int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM events WHERE event_id::text = ANY($1)", ids).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != len(ids) {
		t.Fatalf("%d sends were acknowledged, %d of them are in the event store", len(ids), stored)
	}
	t.Logf("%d sends acknowledged before shutdown, all stored", len(ids))
}
