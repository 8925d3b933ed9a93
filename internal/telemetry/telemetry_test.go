package telemetry_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/internal/telemetry"
)

func TestNewLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l, err := telemetry.NewLogger(&buf, "warn", "json", "n1")
	if err != nil {
		t.Fatal(err)
	}
	l.Info("dropped")
	l.Warn("kept", "tenant_id", "t1")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("want exactly one JSON record, got %q: %v", buf.String(), err)
	}
	if rec["msg"] != "kept" || rec["node_id"] != "n1" || rec["tenant_id"] != "t1" {
		t.Fatalf("record %v", rec)
	}
	buf.Reset()
	l, err = telemetry.NewLogger(&buf, "DEBUG", "text", "")
	if err != nil {
		t.Fatal(err)
	}
	l.Debug("hello")
	if !strings.Contains(buf.String(), "msg=hello") {
		t.Fatalf("text record %q", buf.String())
	}
	for _, bad := range [][2]string{{"loud", "text"}, {"info", "xml"}} {
		if _, err := telemetry.NewLogger(&buf, bad[0], bad[1], ""); err == nil {
			t.Errorf("NewLogger(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

func TestNewRegistry(t *testing.T) {
	t.Parallel()
	mfs, err := telemetry.NewRegistry("v1.2.3").Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetName() == "imledger_build_info" {
			if lbl := mf.GetMetric()[0].GetLabel()[0]; lbl.GetValue() != "v1.2.3" {
				t.Errorf("version label %v", lbl)
			}
		}
	}
	for _, want := range []string{"imledger_build_info", "go_goroutines", "go_sched_latencies_seconds", "process_open_fds"} {
		if !names[want] {
			t.Errorf("metric %s missing", want)
		}
	}
}

func TestHTTPMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/things/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	h := telemetry.HTTPMetrics(reg)(mux)
	for _, path := range []string{"/v1/things/1", "/v1/things/2", "/nowhere"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, path, nil))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "imledger_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var key []string
			for _, l := range m.GetLabel() {
				key = append(key, l.GetName()+"="+l.GetValue())
			}
			got[strings.Join(key, ",")] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"code=201,method=POST,route=POST /v1/things/{id}": 2,
		"code=404,method=POST,route=unmatched":            1,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
