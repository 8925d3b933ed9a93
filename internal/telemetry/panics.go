package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Panics counts the panics a component recovered from, as imledger_panics_total{component}, and
// logs each with its stack. One counter serves every component of a process; it is safe for
// concurrent use, and a nil *Panics only logs.
type Panics struct {
	total *prometheus.CounterVec
}

// PanicComponents are the components that count their panics, each a series of
// imledger_panics_total from the start: "rest" (REST handlers) and "ws" (the WebSocket gateway).
var PanicComponents = []string{"rest", "ws"}

// NewPanics returns the panic counter registered on reg (nil: unregistered). When reg holds the
// counter already, the registered one is used, so every component given the same registry
// shares one series set.
func NewPanics(reg prometheus.Registerer) (*Panics, error) {
	total := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "imledger_panics_total",
		Help: "Panics recovered, by component; each is logged with its stack.",
	}, []string{"component"})
	if reg == nil {
		return &Panics{total: total}, nil
	}
	if err := reg.Register(total); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, fmt.Errorf("register imledger_panics_total: %w", err)
		}
		existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return nil, fmt.Errorf("register imledger_panics_total: %w", err)
		}
		total = existing
	}
	for _, c := range PanicComponents {
		total.WithLabelValues(c) // exported at 0 from the start, so a rate or an alert has a series
	}
	return &Panics{total: total}, nil
}

// Recovered records that component recovered from the panic value v: it logs v with the stack
// of the goroutine at error level, with attrs, and counts it. Call it from the deferred function
// that called recover, so the stack still shows where the panic happened.
func (p *Panics) Recovered(ctx context.Context, log *slog.Logger, component string, v any, attrs ...any) {
	if p != nil && p.total != nil {
		p.total.WithLabelValues(component).Inc()
	}
	if log == nil {
		return
	}
	attrs = append(attrs, "component", component, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	log.ErrorContext(ctx, "recovered from a panic", attrs...)
}

// Count returns how many panics component recovered from, for tests and diagnostics.
func (p *Panics) Count(component string) float64 {
	if p == nil || p.total == nil {
		return 0
	}
	var m dto.Metric
	if err := p.total.WithLabelValues(component).Write(&m); err != nil || m.Counter == nil {
		return 0
	}
	return m.Counter.GetValue()
}
