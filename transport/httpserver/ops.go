package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Check is one readiness probe, such as a ping of the Postgres pool.
type Check struct {
	// Name identifies the dependency in the /readyz answer and in logs, e.g. "postgres".
	Name string
	// Ping returns nil when the dependency answers. It must honour ctx's deadline.
	Ping func(ctx context.Context) error
}

// Config configures Ops.
type Config struct {
	// Checks are run by /readyz, concurrently. Default none (always ready unless draining).
	Checks []Check
	// CheckTimeout bounds each check of one /readyz request. Default 2s.
	CheckTimeout time.Duration
	// Gatherer is the registry /metrics exposes. Required.
	Gatherer prometheus.Gatherer
	// Logger receives failed checks with their errors. Default: discard.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.CheckTimeout == 0 {
		c.CheckTimeout = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem of c, with defaults applied, joined into one error.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if c.Gatherer == nil {
		errs = append(errs, errors.New("httpserver: Gatherer is required"))
	}
	if c.CheckTimeout <= 0 {
		errs = append(errs, errors.New("httpserver: CheckTimeout must be positive"))
	}
	seen := map[string]bool{}
	for _, ch := range c.Checks {
		if ch.Name == "" || ch.Ping == nil {
			errs = append(errs, errors.New("httpserver: every check needs a Name and a Ping"))
		}
		if seen[ch.Name] {
			errs = append(errs, errors.New("httpserver: duplicate check "+ch.Name))
		}
		seen[ch.Name] = true
	}
	return errors.Join(errs...)
}

// Ops serves the operations endpoints. It is safe for concurrent use.
type Ops struct {
	cfg      Config
	draining atomic.Bool
}

// NewOps returns Ops for cfg; it fails when cfg is invalid.
func NewOps(cfg Config) (*Ops, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Ops{cfg: cfg}, nil
}

// Register mounts GET /healthz, GET /readyz and GET /metrics on mux.
func (o *Ops) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", o.healthz)
	mux.HandleFunc("GET /readyz", o.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.cfg.Gatherer, promhttp.HandlerOpts{}))
}

// Drain makes /readyz answer 503 "draining" from now on, so load balancers stop sending new
// traffic while the process shuts down. /healthz keeps answering 200.
func (o *Ops) Drain() { o.draining.Store(true) }

// ReadyStatus is the body of a /readyz answer.
type ReadyStatus struct {
	// Status is "ready", "unavailable" (a check failed) or "draining" (shutting down).
	Status string `json:"status"`
	// Checks maps each check's name to "ok" or "fail".
	Checks map[string]string `json:"checks"`
	// Failed lists the failed checks' names in configuration order.
	Failed []string `json:"failed,omitempty"`
}

func (o *Ops) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "alive"})
}

func (o *Ops) readyz(w http.ResponseWriter, r *http.Request) {
	if o.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, ReadyStatus{Status: "draining", Checks: map[string]string{}})
		return
	}
	st := o.Ready(r.Context())
	code := http.StatusOK
	if st.Status != "ready" {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, st)
}

// Ready runs every check concurrently, each under CheckTimeout, and reports the outcome. Errors
// are logged, not returned: they can carry addresses that a probe's caller need not see.
func (o *Ops) Ready(ctx context.Context) ReadyStatus {
	results := make([]error, len(o.cfg.Checks))
	var wg sync.WaitGroup
	for i, ch := range o.cfg.Checks {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, o.cfg.CheckTimeout)
			defer cancel()
			results[i] = ch.Ping(cctx)
		})
	}
	wg.Wait()
	st := ReadyStatus{Status: "ready", Checks: make(map[string]string, len(results))}
	for i, err := range results {
		name := o.cfg.Checks[i].Name
		if err != nil {
			o.cfg.Logger.WarnContext(ctx, "readiness check failed", "check", name, "err", err)
			st.Checks[name] = "fail"
			st.Failed = append(st.Failed, name)
			st.Status = "unavailable"
			continue
		}
		st.Checks[name] = "ok"
	}
	return st
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
