package rest_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver for migrations
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/migrations"
	"github.com/imledger/imledger/transport/rest"
)

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sendEnv is an API server over a real SendMessageHandler (fresh database, own key prefix).
type sendEnv struct {
	srv    *httptest.Server
	pool   *pgxpool.Pool
	rdb    *redis.Client
	prefix string
}

func newSendEnv(t *testing.T, cfg rest.Config) *sendEnv {
	t.Helper()
	ctx := testCtx(t)
	url := testenv.Postgres(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := migrations.UpPostgres(ctx, db); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store, err := eventstore.New(pool, eventstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rdb, prefix := testenv.Redis(t)
	h, err := commands.NewSendMessageHandler(commands.SendMessageDeps{Store: store, Redis: rdb},
		commands.SendMessageConfig{Partitions: 2, MaxContentBytes: cfg.MaxContentBytes, Seq: seq.Config{KeyPrefix: prefix}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return &sendEnv{srv: newServer(t, cfg, h), pool: pool, rdb: rdb, prefix: prefix}
}

func newServer(t *testing.T, cfg rest.Config, s rest.MessageSender) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	if _, err := rest.New(mux, cfg, rest.Handlers{Send: s}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// answer is a decoded API answer.
type answer struct {
	Status int
	Header http.Header
	Body   struct {
		Code       int               `json:"code"`
		Data       *rest.SentMessage `json:"data"`
		Reason     string            `json:"reason"`
		Message    string            `json:"message"`
		Details    map[string]any    `json:"details"`
		RequestID  string            `json:"request_id"`
		ServerTime string            `json:"server_time"`
	}
	Raw string
}

// post sends body to the send endpoint of topic with the given headers ("" values are left out).
func post(t *testing.T, srv *httptest.Server, topic, body string, headers map[string]string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), http.MethodPost, srv.URL+"/v1/im/topics/"+topic+"/messages", bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	if err := json.Unmarshal(raw, &a.Body); err != nil {
		t.Fatalf("answer is not the JSON envelope: %v: %s", err, raw)
	}
	if a.Body.Code != a.Status || a.Body.RequestID == "" || a.Body.ServerTime == "" ||
		a.Header.Get(rest.HeaderRequestID) != a.Body.RequestID {
		t.Fatalf("envelope fields missing or inconsistent (status %d, X-Request-ID %q): %s",
			a.Status, a.Header.Get(rest.HeaderRequestID), raw)
	}
	if _, err := time.Parse(time.RFC3339Nano, a.Body.ServerTime); err != nil {
		t.Fatalf("server_time: %v", err)
	}
	return a
}

func dev(tenant, user string) map[string]string {
	return map[string]string{rest.HeaderTenant: tenant, rest.HeaderUser: user}
}

func countEvents(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(testCtx(t), "SELECT count(*) FROM events").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// redisKeys counts the keys under the environment's prefix.
func (e *sendEnv) redisKeys(t *testing.T) int {
	t.Helper()
	keys, err := e.rdb.Keys(testCtx(t), e.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}
