package telemetry_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

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
	for _, want := range []string{"imledger_build_info", "go_goroutines", "process_open_fds"} {
		if !names[want] {
			t.Errorf("metric %s missing", want)
		}
	}
}
