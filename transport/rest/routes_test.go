package rest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/internal/telemetry"
	"github.com/imledger/imledger/transport/rest"
)

// TestRouteErrors checks that requests no route takes are answered with the envelope, not the
// mux's text/plain, and are counted under the fixed route label "unmatched".
func TestRouteErrors(t *testing.T) {
	t.Parallel()
	for _, catchAll := range []bool{false, true} {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /v1/im/things", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "made") })
		mux.HandleFunc("DELETE /v1/im/things", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "gone") })
		if catchAll { // like the web page: its own files, http.NotFound for the rest
			mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "text/html")
				_, _ = io.WriteString(w, "<p>page</p>")
			})
		}
		reg := prometheus.NewRegistry()
		srv := httptest.NewServer(telemetry.HTTPMetrics(reg)(rest.RouteErrors(mux)))
		t.Cleanup(srv.Close)
		do := func(method, path string) (int, http.Header, string) {
			t.Helper()
			r, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			client := *srv.Client()
			client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			resp, err := client.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, resp.Header, string(b)
		}
		for _, tc := range []struct {
			method, path string
			status       int
			reason       string
		}{
			{http.MethodGet, "/no/such/route", http.StatusNotFound, rest.ReasonNotFound},
			{http.MethodPut, "/v1/im/things", http.StatusMethodNotAllowed, rest.ReasonMethodNotAllowed},
			{http.MethodGet, "/v1/im/things", http.StatusMethodNotAllowed, rest.ReasonMethodNotAllowed},
			// Paths the mux would clean and redirect (307/301 text/html): unknown routes, no redirect.
			{http.MethodPost, "/v1//im/things", http.StatusNotFound, rest.ReasonNotFound},
			{http.MethodPost, "/v1/im/x/../things", http.StatusNotFound, rest.ReasonNotFound},
			{http.MethodDelete, "/v1/im/./things", http.StatusNotFound, rest.ReasonNotFound},
			{http.MethodGet, "/v1/im/things/..", http.StatusNotFound, rest.ReasonNotFound},
			{http.MethodGet, "//", http.StatusNotFound, rest.ReasonNotFound},
		} {
			status, h, body := do(tc.method, tc.path)
			var env struct {
				Code      int            `json:"code"`
				Reason    string         `json:"reason"`
				Message   string         `json:"message"`
				Details   map[string]any `json:"details"`
				RequestID string         `json:"request_id"`
				Time      string         `json:"server_time"`
			}
			if err := json.Unmarshal([]byte(body), &env); err != nil || h.Get("Content-Type") != "application/json" {
				t.Fatalf("catch-all %v: %s %s: not the envelope (%s): %q", catchAll, tc.method, tc.path, h.Get("Content-Type"), body)
			}
			if status != tc.status || env.Code != tc.status || env.Reason != tc.reason || env.RequestID == "" ||
				env.RequestID != h.Get(rest.HeaderRequestID) || env.Time == "" || env.Message == "" {
				t.Errorf("catch-all %v: %s %s: %d %s", catchAll, tc.method, tc.path, status, body)
			}
			if tc.status == http.StatusMethodNotAllowed && (!strings.Contains(h.Get("Allow"), "POST") || !strings.Contains(h.Get("Allow"), "DELETE")) {
				t.Errorf("catch-all %v: %s %s: Allow %q", catchAll, tc.method, tc.path, h.Get("Allow"))
			}
		}
		if status, _, body := do(http.MethodPost, "/v1/im/things"); status != 200 || body != "made" {
			t.Errorf("catch-all %v: a route's own answer changed: %d %q", catchAll, status, body)
		}
		if catchAll {
			if status, h, body := do(http.MethodGet, "/"); status != 200 || body != "<p>page</p>" || h.Get("Content-Type") != "text/html" {
				t.Errorf("the catch-all's page changed: %d %q", status, body)
			}
		}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "imledger_http_requests_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				counts[labels["route"]+" "+labels["code"]] += m.GetCounter().GetValue()
			}
		}
		if counts["unmatched 404"] != 6 || counts["unmatched 405"] != 2 || counts["/ 404"] != 0 {
			t.Errorf("catch-all %v: request counts by route and code: %v", catchAll, counts)
		}
	}
}
