package admin_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/parquet-go/parquet-go"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/admin"
	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/replay/export"
)

// flakyAccounts is account governance whose password resets fail transiently (PostgreSQL
// unreachable, as far as the consumer can tell) while failing is set.
type flakyAccounts struct {
	admin.Accounts
	failing atomic.Bool
}

func (f *flakyAccounts) ResetPassword(ctx context.Context, t domain.TenantID, u domain.UserID, password string, meta account.Meta) (account.GovernanceResult, error) {
	if f.failing.Load() {
		return account.GovernanceResult{}, domain.Retryable("set password", errors.New("dial tcp 127.0.0.1:5432: connection refused"))
	}
	return f.Accounts.ResetPassword(ctx, t, u, password, meta)
}

// TestNoSecretAtRest: after a password reset that failed for good (retried, recorded in
// admin_command_failures, dead-lettered) and one that succeeded, both signed with their passwords
// sealed as with real brokers, neither password is anywhere at rest: in no row of any table of
// the PostgreSQL database, in no record (key, value or header) of any topic of the Kafka broker
// (commands, results, dead letters, and the events a relay published), in no log line of the
// consumer or the relay, and in no JSON Lines or Parquet export of the tenant. The failure cannot
// be replayed: its password was redacted.
func TestNoSecretAtRest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{signed: true})
	ctx := testenv.Context(t)
	startRelay(t, e)
	flaky := &flakyAccounts{Accounts: e.handlers.Accounts}
	flaky.failing.Store(true)
	e.stop(e.consumer)
	e.handlers.Accounts = flaky
	e.consumer = e.startConsumer("flaky", admin.Config{Retry: admin.RetryConfig{MaxRetries: 2, InitialInterval: 10 * time.Millisecond,
		MaxInterval: 20 * time.Millisecond}})

	tid := newTenantID(t)
	ten := tid.String()
	e.ok(command(ten, domain.CmdTenantProvision, `{}`))
	reg, err := e.accounts.Register(ctx, account.Register{Tenant: tid, Login: "carol", Password: "first password"})
	if err != nil {
		t.Fatal(err)
	}
	failedPassword, okPassword := "failed-"+randomHex(t), "succeeded-"+randomHex(t)
	reset := func(password string) domain.AdminCommand {
		return command(ten, domain.CmdUserResetPassword, fmt.Sprintf(`{"user_id":"%s","password":%q}`, reg.User, password))
	}

	failed := reset(failedPassword)
	r := e.send(failed)
	if r.Status != domain.AdminFailed || r.Reason != admin.ReasonRetriesExhausted || r.Details["failure_id"] == nil {
		t.Fatalf("the failing reset: %+v", r)
	}
	waitFor(t, "the dead letter", func() bool {
		for _, m := range e.dead.snapshot() {
			var c domain.AdminCommand
			if json.Unmarshal(m.Value, &c) == nil && c.EventID == failed.EventID {
				return true
			}
		}
		return false
	})
	list, err := e.failures.List(ctx, admin.FailureFilter{TenantID: ten})
	if err != nil || len(list) != 1 || list[0].EventID != failed.EventID {
		t.Fatalf("failures: %+v %v", list, err)
	}
	var stored domain.AdminCommand
	var p domain.UserResetPasswordPayload
	if json.Unmarshal(list[0].Command, &stored) != nil || json.Unmarshal(stored.Payload, &p) != nil || !p.Password.Redacted() ||
		stored.EventID != failed.EventID || stored.TenantID != ten {
		t.Fatalf("the stored command is not a redacted copy: %s", list[0].Command)
	}
	if _, err := e.failures.Replay(ctx, list[0].ID, uuid.Nil); !errors.Is(err, admin.ErrSecretsRedacted) {
		t.Fatalf("replay of a redacted failure: %v, want ErrSecretsRedacted", err)
	}
	if list, _ := e.failures.List(ctx, admin.FailureFilter{TenantID: ten}); list[0].Status != admin.FailureOpen {
		t.Fatalf("the refused replay changed the failure: %+v", list[0])
	}

	flaky.failing.Store(false)
	if r := e.send(reset(okPassword)); r.Status != domain.AdminSucceeded {
		t.Fatalf("the reset: %+v", r)
	}
	if u, err := e.accounts.Login(ctx, tid, "carol", okPassword); err != nil || u != reg.User {
		t.Fatalf("login with the new password: %v %v", u, err)
	}

	secrets := []string{failedPassword, okPassword}
	dir := t.TempDir()
	var jsonl, parquetRows string
	waitFor(t, "an export with the password reset event", func() bool {
		jsonl, parquetRows = exportTenant(t, e, tid, dir)
		return strings.Contains(jsonl, string(domain.EventUserPasswordReset)) && strings.Contains(parquetRows, string(domain.EventUserPasswordReset))
	})
	var topics map[string]string
	waitFor(t, "the event on Kafka", func() bool {
		topics = kafkaRecords(t, e)
		return strings.Contains(topics["im.business.event"], string(domain.EventUserPasswordReset))
	})
	for _, topic := range []string{commandTopic, resultTopic, deadTopic} {
		if !strings.Contains(topics[topic], failed.EventID.String()) {
			t.Errorf("topic %s does not hold the failed command's records", topic)
		}
	}
	places := map[string]string{"logs": e.logs.String(), "export.jsonl": jsonl, "export.parquet": parquetRows}
	for name, text := range postgresRows(t, e) {
		places["postgres "+name] = text
	}
	for name, text := range topics {
		places["kafka "+name] = text
	}
	if !strings.Contains(places["postgres admin_command_failures"], failed.EventID.String()) || !strings.Contains(places["logs"], "dead-lettered") {
		t.Fatalf("the walk missed what it looks for: %d places", len(places))
	}
	for where, text := range places {
		for _, s := range secrets {
			if strings.Contains(text, s) || strings.Contains(text, hex.EncodeToString([]byte(s))) {
				t.Errorf("a password is in %s", where)
			}
		}
	}
}

func randomHex(t *testing.T) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 60s", what)
		}
	}
}

// startRelay publishes the event store to the environment's broker until the test ends.
func startRelay(t *testing.T, e *env) {
	t.Helper()
	kcfg := kafka.Config{Brokers: e.brokers, Partitions: 2}
	if err := kafka.EnsureTopics(testenv.Context(t), kcfg); err != nil {
		t.Fatal(err)
	}
	r, err := relay.New(e.store, e.pool, relay.Config{Kafka: kcfg, MinPoll: 2 * time.Millisecond, MaxPoll: 50 * time.Millisecond,
		LockRetry: 50 * time.Millisecond, LockCheck: 50 * time.Millisecond, RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		StopTimeout: 10 * time.Second}, slog.New(slog.NewTextHandler(e.logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(testenv.Context(t)))
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
	})
}

// exportTenant exports tenant's events to JSON Lines and to Parquet and returns the JSON Lines
// file and the Parquet rows as JSON.
func exportTenant(t *testing.T, e *env, tenant domain.TenantID, dir string) (string, string) {
	t.Helper()
	ctx := testenv.Context(t)
	name := randomHex(t)
	jsonlPath, parquetPath := filepath.Join(dir, name+".jsonl"), filepath.Join(dir, name+".parquet")
	if _, err := export.Run(ctx, e.store, export.Config{Format: export.FormatJSONL, Out: jsonlPath, Tenant: tenant}); err != nil {
		t.Fatal(err)
	}
	if _, err := export.Run(ctx, e.store, export.Config{Format: export.FormatParquet, Out: parquetPath, Tenant: tenant}); err != nil {
		t.Fatal(err)
	}
	jsonl, err := os.ReadFile(jsonlPath)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parquet.ReadFile[export.Row](parquetPath)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rows)
	raw, _ := os.ReadFile(parquetPath)
	return string(jsonl), string(b) + string(raw)
}

// postgresRows renders every row of every table of the environment's database as text, by
// table.
func postgresRows(t *testing.T, e *env) map[string]string {
	t.Helper()
	ctx := testenv.Context(t)
	rows, err := e.pool.Query(ctx, `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema')`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var s [2]string
		err := r.Scan(&s[0], &s[1])
		return s, err
	})
	if err != nil || len(tables) < 10 {
		t.Fatalf("tables: %v %v", tables, err)
	}
	out := map[string]string{}
	for _, tb := range tables {
		id := pgx.Identifier{tb[0], tb[1]}.Sanitize()
		var text string
		if err := e.pool.QueryRow(ctx, `SELECT coalesce(string_agg(t::text, E'\n'), '') FROM `+id+` t`).Scan(&text); err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		out[tb[1]] = text
	}
	return out
}

// kafkaRecords reads every record (key, value and headers) of every topic of the environment's
// broker, by topic.
func kafkaRecords(t *testing.T, e *env) map[string]string {
	t.Helper()
	client, err := sarama.NewClient(e.brokers, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	topics, err := client.Topics()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, topic := range topics {
		parts, err := client.Partitions(topic)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, p := range parts {
			end, err := client.GetOffset(topic, p, sarama.OffsetNewest)
			if err != nil {
				t.Fatal(err)
			}
			start, err := client.GetOffset(topic, p, sarama.OffsetOldest)
			if err != nil {
				t.Fatal(err)
			}
			if end <= start {
				continue
			}
			pc, err := consumer.ConsumePartition(topic, p, start)
			if err != nil {
				t.Fatal(err)
			}
			// Up to the end offset, or until nothing came for a while (the last offsets may be
			// control records, which are not delivered).
		read:
			for {
				select {
				case m := <-pc.Messages():
					fmt.Fprintf(&b, "%s %s", m.Key, m.Value)
					for _, h := range m.Headers {
						fmt.Fprintf(&b, " %s=%s", h.Key, h.Value)
					}
					b.WriteByte('\n')
					if m.Offset >= end-1 {
						break read
					}
				case <-time.After(2 * time.Second):
					break read
				}
			}
			pc.AsyncClose()
		}
		out[topic] = b.String()
	}
	return out
}
