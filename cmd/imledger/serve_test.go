package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/internal/testenv"
)

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServe runs `imledger serve --config <file>` in-process with a fresh database and its own
// Redis key prefix, publishing to brokers or, when brokers is empty, to the embedded Kafka broker
// on a free port. It returns the base URL and a stop function that cancels the command (as
// SIGTERM does) and returns its error.
func startServe(t *testing.T, brokers []string) (base, dbURL, prefix string, stop func() error) {
	t.Helper()
	dbURL = missingDatabaseURL(t) // serve creates it
	_, prefix = testenv.Redis(t)
	testenv.MySQLServer(t)
	addr := freeAddr(t)
	kafkaYAML := `{embedded: {addr: "127.0.0.1:0"}}`
	if len(brokers) > 0 {
		b, _ := json.Marshal(brokers)
		kafkaYAML = fmt.Sprintf(`{brokers: %s, topic_prefix: "e2e."}`, b)
	}
	yaml := fmt.Sprintf(`
shutdown_timeout: 10s
log: {level: warn, format: json}
http: {addr: %q}
postgres: {url: %q}
kafka: %s
send: {seq: {key_prefix: %q}}
relay: {min_poll: 1ms, max_poll: 20ms}
`, addr, dbURL, kafkaYAML, prefix)
	file := filepath.Join(t.TempDir(), "imledger.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	root := newRootCmd()
	var logs bytes.Buffer
	root.SetOut(io.Discard)
	root.SetErr(&logs)
	root.SetArgs([]string{"serve", "--config", file})
	errc := make(chan error, 1)
	go func() { errc <- root.ExecuteContext(ctx) }()
	base = "http://" + addr
	deadline := time.Now().Add(45 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-errc:
			cancel()
			t.Fatalf("serve exited before it was ready: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("serve not ready after 45s (last error %v)\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(20 * time.Second):
			return fmt.Errorf("serve did not stop within 20s\n%s", logs.String())
		}
	}
	t.Cleanup(func() { _ = stop() })
	return base, dbURL, prefix, stop
}

type sendAnswer struct {
	status int
	Code   int               `json:"code"`
	Reason string            `json:"reason"`
	Data   map[string]any    `json:"data"`
	Detail map[string]string `json:"details"`
	raw    string
}

func send(t *testing.T, base, topic, body string) sendAnswer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/im/topics/"+topic+"/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-IM-Tenant", "demo")
	req.Header.Set("X-IM-User", "42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := sendAnswer{status: resp.StatusCode, raw: string(raw)}
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return a
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeEmbeddedKafka(t *testing.T) {
	t.Parallel()
	base, _, _, stop := startServe(t, nil)
	if a := send(t, base, "grp7", `{"client_msg_id":"e-1","content":"hi"}`); a.status != http.StatusCreated || a.Data["seq"] != "1" {
		t.Fatalf("send: %d %s", a.status, a.raw)
	}
	waitMetric(t, base, `imledger_relay_events_total{relay="default",topic="im.group.message.persist"} 1`)
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}

// waitMetric polls /metrics until it holds line.
func waitMetric(t *testing.T, base, line string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body := get(t, base+"/metrics")
		if strings.Contains(body, line) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never showed %s", line)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestServeEndToEnd(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	base, dbURL, _, stop := startServe(t, brokers)

	first := send(t, base, "grp1", `{"client_msg_id":"m-1","content":"hello"}`)
	if first.status != http.StatusCreated || first.Data["seq"] != "1" {
		t.Fatalf("first send: %d %s", first.status, first.raw)
	}
	again := send(t, base, "grp1", `{"client_msg_id":"m-1","content":"hello"}`)
	if again.status != http.StatusOK || again.Data["seq"] != "1" || again.Data["duplicate"] != true ||
		again.Data["message_id"] != first.Data["message_id"] {
		t.Fatalf("repeated send: %d %s", again.status, again.raw)
	}
	bad := send(t, base, "grp1", `{"client_msg_id":"","content":"hello"}`)
	if bad.status != http.StatusBadRequest || bad.Reason != "invalid" || bad.Detail["field"] != "client_msg_id" || bad.Detail["reason"] != "required" {
		t.Fatalf("bad send: %d %s", bad.status, bad.raw)
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

	// The relay publishes the one committed event, keyed by conversation, under the prefix.
	recs := consume(t, brokers, "e2e.im.group.message.persist", 1)
	r := recs[0]
	headers := map[string]string{}
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	if string(r.Key) != "demo:grp1" || headers["event_id"] != first.Data["message_id"] || headers["stream_version"] != "1" {
		t.Errorf("published record: key %q headers %v, want key demo:grp1, event_id %v", r.Key, headers, first.Data["message_id"])
	}

	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("HTTP still answers after shutdown")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	var version int64
	if err := conn.QueryRow(ctx, "SELECT count(*), max(stream_version) FROM events WHERE tenant_id = 'demo' AND stream_id = 'grp1'").Scan(&n, &version); err != nil {
		t.Fatal(err)
	}
	if n != 1 || version != 1 {
		t.Fatalf("events in grp1: %d (max version %d), want exactly the one accepted send", n, version)
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
	base, dbURL, _, stop := startServe(t, nil)
	type ack struct{ id, status string }
	acks := make(chan ack, 100000)
	done := make(chan struct{})
	client := &http.Client{Timeout: 15 * time.Second}
	for s := range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; ; i++ {
				body := fmt.Sprintf(`{"client_msg_id":"s%d-%d","content":"x"}`, s, i)
				req, _ := http.NewRequest(http.MethodPost, base+"/v1/im/topics/grp"+fmt.Sprint(s%3+1)+"/messages", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-IM-Tenant", "demo")
				req.Header.Set("X-IM-User", fmt.Sprint(s+1))
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
	if err := stop(); err != nil {
		t.Fatalf("graceful stop under load: %v", err)
	}
	for range 8 {
		<-done
	}
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
	conn, err := pgx.Connect(ctx, dbURL)
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
