package httpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/httpserver"
)

func serve(t *testing.T, cfg httpserver.Config) (*httpserver.Ops, *httptest.Server) {
	t.Helper()
	ops, err := httpserver.NewOps(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	ops.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return ops, srv
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

func TestReadyz(t *testing.T) {
	t.Parallel()
	rdb, _ := testenv.Redis(t)
	reg := prometheus.NewRegistry()
	hung := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	tests := []struct {
		name   string
		checks []httpserver.Check
		code   int
		failed []string
	}{
		{"all answer", []httpserver.Check{
			{Name: "redis", Ping: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
		}, http.StatusOK, nil},
		{"one fails, one hangs past the timeout", []httpserver.Check{
			{Name: "redis", Ping: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
			{Name: "mysql", Ping: func(context.Context) error { return errors.New("dial tcp: refused") }},
			{Name: "kafka", Ping: hung},
		}, http.StatusServiceUnavailable, []string{"mysql", "kafka"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, srv := serve(t, httpserver.Config{Checks: tt.checks, Gatherer: reg, CheckTimeout: 200 * time.Millisecond})
			start := time.Now()
			code, body := get(t, srv.URL+"/readyz")
			if time.Since(start) > 2*time.Second {
				t.Errorf("checks did not run under the timeout: %s", time.Since(start))
			}
			var st httpserver.ReadyStatus
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
			if code != tt.code || !slices.Equal(st.Failed, tt.failed) {
				t.Fatalf("got %d %s, want %d failed=%v", code, body, tt.code, tt.failed)
			}
			if strings.Contains(body, "refused") {
				t.Errorf("error text leaked into /readyz: %s", body)
			}
			if st.Checks["redis"] != "ok" {
				t.Errorf("redis check: %s", body)
			}
		})
	}
}

func TestDrainHealthzMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "imledger_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)
	ops, srv := serve(t, httpserver.Config{Gatherer: reg})
	if code, _ := get(t, srv.URL+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz with no checks: %d", code)
	}
	ops.Drain()
	if code, body := get(t, srv.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "draining") {
		t.Fatalf("readyz while draining: %d %s", code, body)
	}
	if code, body := get(t, srv.URL+"/healthz"); code != http.StatusOK || !strings.Contains(body, "alive") {
		t.Fatalf("healthz: %d %s", code, body)
	}
	if code, body := get(t, srv.URL+"/metrics"); code != http.StatusOK || !strings.Contains(body, "imledger_test_total 3") {
		t.Fatalf("metrics: %d %s", code, body)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	ping := func(context.Context) error { return nil }
	_, err := httpserver.NewOps(httpserver.Config{Checks: []httpserver.Check{{Name: "a", Ping: ping}, {Name: "a", Ping: ping}, {Name: "b"}}})
	for _, want := range []string{"Gatherer", "duplicate check a", "Name and a Ping"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want error about %s, got %v", want, err)
		}
	}
}
