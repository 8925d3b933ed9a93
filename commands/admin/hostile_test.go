package admin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/imledger/imledger/commands/admin"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// produceTo produces the records in one flush, each to its own partition of im.admin.command.
func (e *env) produceTo(recs ...*sarama.ProducerMessage) {
	e.t.Helper()
	sc := saramaConfig()
	sc.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer(e.brokers, sc)
	if err != nil {
		e.t.Fatal(err)
	}
	defer p.Close()
	for _, r := range recs {
		r.Topic = commandTopic
	}
	if err := p.SendMessages(recs); err != nil {
		e.t.Fatal(err)
	}
}

func record(partition int32, key string, value []byte, headers ...string) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Partition: partition, Key: sarama.StringEncoder(key), Value: sarama.ByteEncoder(value)}
	for i := 0; i+1 < len(headers); i += 2 {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(headers[i]), Value: []byte(headers[i+1])})
	}
	return m
}

func marshal(t *testing.T, cmd domain.AdminCommand) []byte {
	t.Helper()
	b, err := json.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ledgerRows counts the admin_commands rows of command id.
func (e *env) ledgerRows(id uuid.UUID) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(testenv.Context(e.t), `SELECT count(*) FROM admin_commands WHERE event_id = $1`, id).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestHostileEnvelopeStringsAreRejectedBeforeAnythingIsWritten: an envelope string with a NUL, a
// control character, bytes that are not UTF-8 or more than the bound is answered
// invalid_envelope naming the field, claims nothing, echoes only a bounded prefix, and the valid
// command after it on the same partition is answered.
func TestHostileEnvelopeStringsAreRejectedBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	tid := newTenantID(t)
	ten := tid.String()
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	e.accountsOf(tid, 42, 43)
	long := strings.Repeat("x", 400_000)
	for i, c := range []struct {
		name  string
		field string
		mut   func(*domain.AdminCommand)
		raw   func([]byte) []byte // applied to the encoded record
	}{
		{"NUL in tenant_id", "tenant_id", func(c *domain.AdminCommand) { c.TenantID = "pc\u0000a" }, nil},
		{"NUL in event_type", "event_type", func(c *domain.AdminCommand) { c.EventType = "user.kick\u0000" }, nil},
		{"NUL in trace_id", "trace_id", func(c *domain.AdminCommand) { c.TraceID = "nul\u0000trace" }, nil},
		{"control character in biz_id", "biz_id", func(c *domain.AdminCommand) { c.BizID = "a\u001bb" }, nil},
		{"DEL in idempotency_key", "idempotency_key", func(c *domain.AdminCommand) { c.IdempotencyKey = "a\u007f" }, nil},
		{"long event_type", "event_type", func(c *domain.AdminCommand) { c.EventType = long }, nil},
		{"long trace_id", "trace_id", func(c *domain.AdminCommand) { c.TraceID = long }, nil},
		{"long source_service", "source_service", func(c *domain.AdminCommand) { c.SourceService = strings.Repeat("s", 300) }, nil},
		{"raw 0xff in trace_id", "", func(c *domain.AdminCommand) { c.TraceID = "bad-utf8" },
			func(b []byte) []byte { return bytes.Replace(b, []byte("bad-utf8"), []byte("bad\xffutf8"), 1) }},
	} {
		key := fmt.Sprintf("%s:hostile:%d", ten, i)
		bad := command(ten, domain.CmdUserKick, `{"user_id":"42"}`)
		c.mut(&bad)
		body := marshal(t, bad)
		if c.raw != nil {
			body = c.raw(body)
		}
		good := command(ten, domain.CmdUserKick, `{"user_id":"43"}`)
		e.produceTo(record(2, key, body), record(2, key, marshal(t, good)))
		r := e.await(bad.EventID, 1)
		if r.Status != domain.AdminRejected || r.Reason != admin.ReasonInvalidEnvelope || (c.field != "" && r.Details["field"] != c.field) {
			t.Errorf("%s: %s %s %v, want rejected invalid_envelope field %q", c.name, r.Status, r.Reason, r.Details, c.field)
		}
		if len(r.EventType) > 256 || len(r.TraceID) > 256 || strings.ContainsRune(r.TenantID, 0) {
			t.Errorf("%s: the result echoes the bad strings: event_type %d bytes, trace_id %d bytes, tenant_id %q", c.name,
				len(r.EventType), len(r.TraceID), r.TenantID)
		}
		if g := e.await(good.EventID, 1); g.Status != domain.AdminSucceeded {
			t.Errorf("%s: the command after it: %s %s %v", c.name, g.Status, g.Reason, g.Details)
		}
		if n := e.ledgerRows(bad.EventID); n != 0 {
			t.Errorf("%s: the rejected envelope was claimed (%d rows)", c.name, n)
		}
	}
	for _, m := range e.results.snapshot() {
		if size := len(m.Key) + len(m.Value); size > 8192 {
			t.Errorf("a result of %d bytes", size)
		}
		for _, h := range m.Headers {
			if len(h.Value) > 512 {
				t.Errorf("result header %s of %d bytes", h.Key, len(h.Value))
			}
		}
	}
}

// failingAppender is the event store, except that its appends for one tenant fail with err.
type failingAppender struct {
	admin.EventAppender
	tenant domain.TenantID
	err    error
}

func (f failingAppender) Append(ctx context.Context, t domain.TenantID, streamID string, expected int64, evs []domain.Envelope) ([]domain.Envelope, error) {
	if t == f.tenant {
		return nil, fmt.Errorf("append events: %w", f.err)
	}
	return f.EventAppender.Append(ctx, t, streamID, expected, evs)
}

// TestStoreRefusingACommandsDataFailsItAtOnce: a command PostgreSQL refuses for its data (SQLSTATE
// class 22) is not retried: it is answered failed (permanent_failure) after one attempt, recorded
// in admin_command_failures and produced to im.dead.letter even though its record holds a \u0000
// that jsonb refuses, and the next command on its partition is answered.
func TestStoreRefusingACommandsDataFailsItAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := testenv.Context(t)
	tid := newTenantID(t)
	ten := tid.String()
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	e.stop(e.consumer)
	e.handlers.Events = failingAppender{EventAppender: e.store, tenant: tid,
		err: &pgconn.PgError{Code: "22021", Message: `invalid byte sequence for encoding "UTF8": 0x00`}}
	e.startConsumer("test-2", admin.Config{Retry: admin.RetryConfig{MaxRetries: 3, InitialInterval: 10 * time.Millisecond,
		MaxInterval: 50 * time.Millisecond}})

	bad := command(ten, domain.CmdMessageBroadcast, `{"content":{"text":"refused"}}`)
	body := marshal(t, bad)
	body = append(body[:len(body)-1], []byte(`,"x_note":"a\u0000b"}`)...) // an extra field jsonb refuses
	next := command("nosuch", domain.CmdUserKick, `{"user_id":"42"}`)
	e.produceTo(record(9, "k9", body), record(9, "k9", marshal(t, next)))
	r := e.await(bad.EventID, 1)
	if r.Status != domain.AdminFailed || r.Reason != "permanent_failure" || r.Details["attempts"] != float64(1) {
		t.Fatalf("result: %+v", r)
	}
	if n := e.await(next.EventID, 1); n.Reason != domain.ReasonTenantNotFound {
		t.Fatalf("the next command: %+v", n)
	}
	list, err := e.failures.List(ctx, admin.FailureFilter{TenantID: ten})
	if err != nil || len(list) != 1 || list[0].EventID != bad.EventID || fmt.Sprint(list[0].ID) != r.Details["failure_id"] ||
		!bytes.Equal(list[0].Command, body) {
		t.Fatalf("failures: %+v %v", list, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		found := false
		for _, m := range e.dead.snapshot() {
			if bytes.Equal(m.Value, body) {
				found = true
			}
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no dead letter")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSameCommandOnManyPartitionsRunsOnceAndAnswersEveryCopy: the same command produced at once
// to four partitions runs once and every copy gets the same result, byte for byte.
func TestSameCommandOnManyPartitionsRunsOnceAndAnswersEveryCopy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := testenv.Context(t)
	tid := newTenantID(t)
	ten := tid.String()
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	const ids, copies = 50, 4
	for i := range ids {
		e.accountsOf(tid, int64(1000+i))
	}
	var (
		cmds []domain.AdminCommand
		recs []*sarama.ProducerMessage
	)
	for i := range ids {
		c := command(ten, domain.CmdUserBan, fmt.Sprintf(`{"user_id":"%d"}`, 1000+i)) // a stream each: no conflicts
		cmds = append(cmds, c)
		for p := range copies {
			recs = append(recs, record(int32(3+p), fmt.Sprintf("pair%c%d", 'A'+p, i), marshal(t, c)))
		}
	}
	e.produceTo(recs...)
	for _, c := range cmds {
		e.await(c.EventID, copies)
	}
	time.Sleep(300 * time.Millisecond)
	for _, c := range cmds {
		rs := e.resultsOf(c.EventID)
		first, _ := json.Marshal(rs[0])
		for _, r := range rs[1:] {
			if b, _ := json.Marshal(r); !bytes.Equal(b, first) {
				t.Errorf("copies of %s answered differently:\n%s\n%s", c.EventID, first, b)
			}
		}
		if len(rs) != copies || rs[0].Status != domain.AdminSucceeded {
			t.Errorf("%s: %d results, first %s", c.EventID, len(rs), first)
		}
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE tenant_id = $1 AND causation_id = $2`, ten,
			c.EventID.String()).Scan(&n); err != nil || n != 1 {
			t.Errorf("%s ran %d times (%v)", c.EventID, n, err)
		}
	}
}

// TestSameBodyUnderDifferentEventIDHeadersRunsOnce: two records of one command (same body) whose
// event_id headers differ, produced together while no consumer runs so they arrive in one
// batch, run it once and both get its result.
func TestSameBodyUnderDifferentEventIDHeadersRunsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := testenv.Context(t)
	tid := newTenantID(t)
	ten := tid.String()
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	e.stop(e.consumer)
	var (
		cmds []domain.AdminCommand
		recs []*sarama.ProducerMessage
	)
	for i := range 5 {
		c := command(ten, domain.CmdMessageBroadcast, fmt.Sprintf(`{"content":{"text":"twice %d"}}`, i))
		cmds = append(cmds, c)
		body := marshal(t, c)
		recs = append(recs, record(1, "k", body, "event_id", "aaa"), record(1, "k", body, "event_id", "bbb"))
	}
	e.produceTo(recs...)
	e.startConsumer("test-2", admin.Config{Retry: admin.RetryConfig{MaxRetries: 3, InitialInterval: 10 * time.Millisecond,
		MaxInterval: 50 * time.Millisecond}})
	for _, c := range cmds {
		a, b := e.await(c.EventID, 1), e.await(c.EventID, 2)
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if a.Status != domain.AdminSucceeded || !bytes.Equal(ja, jb) {
			t.Errorf("answers:\n%s\n%s", ja, jb)
		}
		var n int
		if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE tenant_id = $1 AND causation_id = $2`, ten,
			c.EventID.String()).Scan(&n); err != nil || n != 1 {
			t.Errorf("the command ran %d times (%v)", n, err)
		}
	}
}

// TestReusedEventIDIsRejected: an event_id reused for another tenant, command type or payload is
// rejected event_id_reused under the reusing command's own tenant, never answered with the first
// command's result; the first command's exact repeat still gets its stored result.
func TestReusedEventIDIsRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := testenv.Context(t)
	pca, pcb := newTenantID(t), newTenantID(t)
	e.ok(command(pca.String(), domain.CmdTenantProvision, `{}`))
	e.ok(command(pcb.String(), domain.CmdTenantProvision, `{}`))
	first := command(pca.String(), domain.CmdMessageBroadcast, `{"content":{"text":"for pca"}}`)
	stored := e.send(first)
	if stored.Status != domain.AdminSucceeded {
		t.Fatalf("first: %+v", stored)
	}
	otherTenant := first
	otherTenant.TenantID, otherTenant.Payload = pcb.String(), json.RawMessage(`{"content":{"text":"for pcb"}}`)
	otherPayload := first
	otherPayload.Payload = json.RawMessage(`{"content":{"text":"changed"}}`)
	otherType := first
	otherType.EventType, otherType.Payload = string(domain.CmdUserKick), json.RawMessage(`{"user_id":"42"}`)
	for n, c := range []domain.AdminCommand{otherTenant, otherPayload, otherType} {
		e.produce(commandTopic, "reuse", marshal(t, c))
		r := e.await(first.EventID, n+2)
		if r.Status != domain.AdminRejected || r.Reason != "event_id_reused" || r.TenantID != c.TenantID || r.EventType != c.EventType ||
			len(r.Result) != 0 {
			t.Errorf("reuse %d: %+v %s", n, r, r.Result)
		}
	}
	if bs, _ := e.store.ReadStream(ctx, pcb, domain.TenantBroadcastStreamID, 0, 0); len(bs) != 0 {
		t.Errorf("the reuse ran in pcb: %d broadcasts", len(bs))
	}
	e.produce(commandTopic, "repeat", marshal(t, first))
	again := e.await(first.EventID, 5)
	a, _ := json.Marshal(stored)
	b, _ := json.Marshal(again)
	if !bytes.Equal(a, b) {
		t.Fatalf("the exact repeat:\n%s\n%s", a, b)
	}
}

// TestOversizedResultIsReplacedBySmallFailure: a command whose result cannot fit
// Config.MaxResultBytes (its record key alone is past it) is answered with a small failed result
// (result_too_large) instead of being retried forever, and the next command is answered.
func TestOversizedResultIsReplacedBySmallFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	tid := newTenantID(t)
	ten := tid.String()
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	e.stop(e.consumer)
	cfg := admin.Config{MaxResultBytes: 4096, Retry: admin.RetryConfig{MaxRetries: 3, InitialInterval: 10 * time.Millisecond,
		MaxInterval: 50 * time.Millisecond}}
	e.startConsumer("test-2", cfg)
	e.accountsOf(tid, 42, 43)
	big := command(ten, domain.CmdUserKick, `{"user_id":"42"}`)
	next := command(ten, domain.CmdUserKick, `{"user_id":"43"}`)
	e.produceTo(record(0, strings.Repeat("k", 8000), marshal(t, big)), record(0, "k0", marshal(t, next)))
	r := e.await(big.EventID, 1)
	if r.Status != domain.AdminFailed || r.Reason != "result_too_large" || r.Details["status"] != domain.AdminSucceeded {
		t.Fatalf("result: %+v", r)
	}
	if n := e.await(next.EventID, 1); n.Status != domain.AdminSucceeded {
		t.Fatalf("the next command: %+v", n)
	}
}
