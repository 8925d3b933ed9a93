package wsbench_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/cmd/imledger/bench/wsbench"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/presence"
	"github.com/imledger/imledger/transport/ws"
)

// gateway starts n gateway nodes over a fresh database and key prefix and returns their URLs
// and the token signer.
func gateway(t testing.TB, nodes int) ([]string, *auth.Signer, *eventstore.Store) {
	urls, tokens, store, _ := gatewayWithMetrics(t, nodes)
	return urls, tokens, store
}

// gatewayWithMetrics is gateway plus a registry holding every node's gateway metrics.
func gatewayWithMetrics(t testing.TB, nodes int) ([]string, *auth.Signer, *eventstore.Store, *prometheus.Registry) {
	t.Helper()
	_, store := storetest.EventStore(t, 16)
	rdb, prefix := testenv.Redis(t)
	tokens, err := auth.NewSigner(auth.Config{Keys: []auth.Key{{ID: "k1", Secret: strings.Repeat("b", 32)}}})
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	reg := prometheus.NewRegistry()
	for i := range nodes {
		id := string(rune('a' + i))
		pres, err := presence.New(presence.Deps{Redis: rdb}, presence.Config{KeyPrefix: prefix, NodeID: id})
		if err != nil {
			t.Fatal(err)
		}
		hub := ws.NewHub()
		fan, err := fanout.New(fanout.Deps{Redis: rdb, Nodes: pres, Local: hub}, fanout.Config{KeyPrefix: prefix, NodeID: id})
		if err != nil {
			t.Fatal(err)
		}
		if err := fan.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fan.Close() })
		// Each node's own send handler delivers what it commits through the node's fanout.
		send, err := message.NewSendMessageHandler(message.SendMessageDeps{Store: store, Redis: rdb,
			Listener: fanout.Commits{Publisher: fan}}, message.SendMessageConfig{Seq: seq.Config{KeyPrefix: prefix}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = send.Close() })
		gw, err := ws.New(ws.Deps{Tokens: tokens, Sender: send, Presence: pres, Hub: hub, Publisher: fan,
			Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"node": id}, reg)}, ws.Config{})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		mux.Handle(ws.Path, gw)
		srv := httptest.NewServer(mux)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = gw.Shutdown(ctx)
			srv.Close()
		})
		urls = append(urls, "ws"+strings.TrimPrefix(srv.URL, "http")+ws.Path)
	}
	return urls, tokens, store, reg
}

func TestRunMeasuresEveryMessage(t *testing.T) {
	t.Parallel()
	urls, tokens, store := gateway(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := wsbench.Run(ctx, wsbench.Options{URLs: urls, Tenant: domain.MustTenantID("bench"), Tokens: tokens,
		Clients: 20, Groups: 4, Rate: 200, Duration: 2 * time.Second, Drain: 5 * time.Second, ContentBytes: 200})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := res.Print(&out); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	// 200 msg/s for 2 s, within scheduling slack.
	if res.Sent < 300 || res.Sent > 440 {
		t.Errorf("sent %d, want about 400", res.Sent)
	}
	if res.Acked != res.Sent || res.ErrorCount() != 0 {
		t.Errorf("acked %d of %d, errors %v", res.Acked, res.Sent, res.Errors)
	}
	// Groups of 5: every message reaches the 4 other members.
	if res.Expected != 4*res.Acked || res.Delivered != res.Expected {
		t.Errorf("delivered %d, expected %d (4 per acked message: %d)", res.Delivered, res.Expected, 4*res.Acked)
	}
	if res.Ack.Count != res.Acked || res.Ack.P50 <= 0 || res.Ack.P99 < res.Ack.P50 || res.Ack.Max < res.Ack.P99 {
		t.Errorf("ack latency %+v", res.Ack)
	}
	if res.Deliver.Count != res.Delivered || res.Deliver.P50 <= 0 {
		t.Errorf("deliver latency %+v", res.Deliver)
	}
	n, err := store.Count(ctx, eventstore.Filter{})
	if err != nil || n != res.Acked {
		t.Errorf("%d events stored (%v), want %d", n, err, res.Acked)
	}
	for _, want := range []string{"sent", "acked", "delivered", "errors", "ack latency", "send->deliver", "p99"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestRunOneSenderClosedLoop(t *testing.T) {
	t.Parallel()
	urls, tokens, _ := gateway(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var monitored atomic.Bool
	res, err := wsbench.Run(ctx, wsbench.Options{URLs: urls, Tenant: domain.MustTenantID("bench"), Tokens: tokens,
		Clients: 12, Groups: 1, Senders: 1, InFlight: 1, Duration: time.Second, Drain: 5 * time.Second,
		Monitor: func(ctx context.Context) { monitored.Store(true); <-ctx.Done() }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rate != 0 || res.Senders != 1 || res.InFlight != 1 {
		t.Errorf("result names rate %v, senders %d, in flight %d; want unpaced, 1, 1", res.Rate, res.Senders, res.InFlight)
	}
	// Closed loop: as many pubs as acks came back, never two at once, so every one is answered.
	if res.Sent < 5 || res.Acked != res.Sent || res.ErrorCount() != 0 {
		t.Errorf("sent %d, acked %d, errors %v", res.Sent, res.Acked, res.Errors)
	}
	if res.Expected != 11*res.Acked || res.Delivered != res.Expected {
		t.Errorf("delivered %d, expected %d (11 per acked message: %d)", res.Delivered, res.Expected, 11*res.Acked)
	}
	if !monitored.Load() {
		t.Error("Monitor never ran")
	}
}

func TestRunIdleHoldsConnections(t *testing.T) {
	t.Parallel()
	urls, tokens, store := gateway(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := wsbench.Run(ctx, wsbench.Options{URLs: urls, Tenant: domain.MustTenantID("bench"), Tokens: tokens,
		Clients: 30, Groups: 3, Idle: true, Duration: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Idle || res.Held != 30 || res.Sent != 0 || res.ErrorCount() != 0 || res.Setup <= 0 {
		t.Errorf("idle run: held %d of 30, sent %d, errors %v, setup %s", res.Held, res.Sent, res.Errors, res.Setup)
	}
	var out bytes.Buffer
	if err := res.Print(&out); err != nil || !strings.Contains(out.String(), "held") {
		t.Errorf("report %q (%v) lacks the held connections", out.String(), err)
	}
	if n, err := store.Count(ctx, eventstore.Filter{}); err != nil || n != 0 {
		t.Errorf("%d events stored (%v), want none", n, err)
	}
}

func TestSampleProcessReadsThisProcess(t *testing.T) {
	t.Parallel()
	// The kernel counts CPU time in clock ticks: a test process that just started may have
	// none yet, so spend some until a sample shows it.
	var (
		s   wsbench.ProcessSample
		err error
	)
	for deadline := time.Now().Add(5 * time.Second); ; {
		if s, err = wsbench.SampleProcess(os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if s.CPU > 0 || time.Now().After(deadline) {
			break
		}
		for start := time.Now(); time.Since(start) < 20*time.Millisecond; {
		}
	}
	if s.RSS < 1<<20 || s.HWM < s.RSS || s.CPU <= 0 {
		t.Errorf("sample %+v: want an RSS of at least 1 MiB, a peak at least as high and some CPU time", s)
	}
	if _, err := wsbench.SampleProcess(-1); err == nil {
		t.Error("sampling pid -1 succeeded")
	}
	m := &wsbench.ProcessMonitor{PID: os.Getpid(), Label: "test"}
	var out bytes.Buffer
	if err := m.Report(&out); !errors.Is(err, wsbench.ErrNoSamples) {
		t.Errorf("Report before Run = %v, want ErrNoSamples", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1100*time.Millisecond)
	defer cancel()
	m.Run(ctx)
	if err := m.Report(&out); err != nil || !strings.Contains(out.String(), "test pid") || !strings.Contains(out.String(), "MiB") {
		t.Errorf("report %q, %v", out.String(), err)
	}
	if start, end := m.Load(); start == "" || end == "" {
		t.Errorf("load average %q at the start, %q at the end", start, end)
	}
}

func TestRunFailsWhenClientsCannotLogIn(t *testing.T) {
	t.Parallel()
	urls, _, _ := gateway(t, 1)
	other, err := auth.NewSigner(auth.Config{Keys: []auth.Key{{ID: "k1", Secret: strings.Repeat("z", 32)}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = wsbench.Run(ctx, wsbench.Options{URLs: urls, Tenant: domain.MustTenantID("bench"), Tokens: other,
		Clients: 3, Groups: 1, Duration: time.Second})
	if err == nil || !strings.Contains(err.Error(), "token_invalid") {
		t.Errorf("Run with foreign tokens = %v, want a login refusal", err)
	}
	if err := (wsbench.Options{}).Validate(); err == nil {
		t.Error("empty options validated")
	}
}

// BenchmarkGateway runs the load client against two gateway nodes over the local PostgreSQL and
// Redis and reports the rates and latencies. Run it with
//
//	go test -run '^$' -bench Gateway -benchtime 1x ./transport/ws/wsbench
//
// and set IMLEDGER_BENCH_CLIENTS, _GROUPS, _RATE and _SECONDS to change the load.
func BenchmarkGateway(b *testing.B) {
	urls, tokens, _, reg := gatewayWithMetrics(b, 2)
	o := wsbench.Options{URLs: urls, Tenant: domain.MustTenantID("bench"), Tokens: tokens,
		Clients: envInt("IMLEDGER_BENCH_CLIENTS", 200), Groups: envInt("IMLEDGER_BENCH_GROUPS", 20),
		Rate: float64(envInt("IMLEDGER_BENCH_RATE", 2000)), Duration: time.Duration(envInt("IMLEDGER_BENCH_SECONDS", 10)) * time.Second}
	for i := range b.N {
		o.FirstGroup = int64(1_000_000 + i*o.Groups) // fresh topics each round
		res, err := wsbench.Run(context.Background(), o)
		if err != nil {
			b.Fatal(err)
		}
		var out bytes.Buffer
		_ = res.Print(&out)
		b.Logf("\n%s", out.String())
		secs := res.Duration.Seconds()
		b.ReportMetric(float64(res.Acked)/secs, "acked/s")
		b.ReportMetric(float64(res.Delivered)/secs, "delivered/s")
		b.ReportMetric(float64(res.Ack.P99.Microseconds())/1000, "ack-p99-ms")
		b.ReportMetric(float64(res.Deliver.P99.Microseconds())/1000, "deliver-p99-ms")
		b.ReportMetric(float64(res.ErrorCount()), "errors")
	}
	b.Logf("gateway disconnects by cause: %v", disconnects(b, reg))
}

// disconnects sums imledger_ws_disconnects_total by cause over the nodes.
func disconnects(t testing.TB, reg *prometheus.Registry) map[string]float64 {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "imledger_ws_disconnects_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cause" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
