package projections

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics are the projection metrics, labelled by consumer group:
//
//	imledger_projection_lag_events          events behind: high watermark − committed offset, summed over partitions
//	imledger_projection_lag_seconds         now − occurred_at of the newest applied event; 0 when caught up
//	imledger_projection_events_applied_total events written to the read model (duplicates excluded)
//	imledger_projection_retries_total       retries of failing events
//	imledger_projection_dead_letters_total  events dead-lettered, also labelled by reason
//	imledger_projection_parked_events_total events parked behind a dead letter
//	imledger_projection_batch_events        events per read-model batch
//	imledger_projection_flush_seconds       time to write one batch
//
// A consumer group keeps up to Config.InFlight records per Kafka partition in flight, so under
// a backlog a batch fills up to Config.Batch.MaxEvents: small batches while the lag grows mean
// the records are not arriving fast enough, full ones that the writes hold the projection back.
// imledger_projection_retries_total also counts transient failures the batcher retried.
type Metrics struct {
	applied     *prometheus.CounterVec
	retries     *prometheus.CounterVec
	deadLetters *prometheus.CounterVec
	parked      *prometheus.CounterVec
	lagEvents   *prometheus.GaugeVec
	lagSeconds  *prometheus.GaugeVec
	batchEvents *prometheus.HistogramVec
	flushTime   *prometheus.HistogramVec

	mu          sync.Mutex
	lastApplied map[string]time.Time
}

// NewMetrics creates the projection metrics and registers them with reg; a nil reg keeps them
// unregistered. It fails if a metric of the same name is already registered with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	group := []string{"consumer_group"}
	m := &Metrics{
		applied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imledger_projection_events_applied_total",
			Help: "Events written to a read model, duplicates excluded."}, group),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imledger_projection_retries_total",
			Help: "Retries of events whose handler failed."}, group),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imledger_projection_dead_letters_total",
			Help: "Events sent to the dead letters."}, []string{"consumer_group", "reason"}),
		parked: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imledger_projection_parked_events_total",
			Help: "Events parked behind a dead letter of their conversation."}, group),
		lagEvents: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "imledger_projection_lag_events",
			Help: "Events not yet consumed: high watermark minus committed offset, summed over partitions."}, group),
		lagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "imledger_projection_lag_seconds",
			Help: "Age of the newest applied event while the group is behind; 0 when caught up."}, group),
		batchEvents: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "imledger_projection_batch_events",
			Help:    "Events per read-model batch.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11)}, group),
		flushTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "imledger_projection_flush_seconds",
			Help:    "Time to write one read-model batch, the lookup of parked conversations included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}, group),
		lastApplied: map[string]time.Time{},
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.applied, m.retries, m.deadLetters, m.parked, m.lagEvents, m.lagSeconds,
		m.batchEvents, m.flushTime} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}

func (m *Metrics) observeApplied(group string, occurredAt time.Time) {
	if occurredAt.IsZero() {
		return
	}
	m.mu.Lock()
	if occurredAt.After(m.lastApplied[group]) {
		m.lastApplied[group] = occurredAt
	}
	m.mu.Unlock()
}

// secondsBehind is now − occurred_at of the newest applied event, or 0 when eventsBehind is 0
// (an idle, caught-up projection is not late).
func (m *Metrics) secondsBehind(group string, eventsBehind int64, now time.Time) float64 {
	if eventsBehind <= 0 {
		return 0
	}
	m.mu.Lock()
	last, ok := m.lastApplied[group]
	m.mu.Unlock()
	if !ok {
		return 0
	}
	if d := now.Sub(last).Seconds(); d > 0 {
		return d
	}
	return 0
}

// Applied returns how many events group has applied in this process.
func (m *Metrics) Applied(group string) float64 { return value(m.applied.WithLabelValues(group)) }

// Retries returns how many retries group has made in this process.
func (m *Metrics) Retries(group string) float64 { return value(m.retries.WithLabelValues(group)) }

// DeadLetters returns how many events group has dead-lettered for reason in this process.
func (m *Metrics) DeadLetters(group, reason string) float64 {
	return value(m.deadLetters.WithLabelValues(group, reason))
}

// Parked returns how many events group has parked in this process.
func (m *Metrics) Parked(group string) float64 { return value(m.parked.WithLabelValues(group)) }

// Batches returns how many batches group has written in this process and how many events they
// held.
func (m *Metrics) Batches(group string) (batches uint64, events float64) {
	var d dto.Metric
	if err := m.batchEvents.WithLabelValues(group).(prometheus.Histogram).Write(&d); err != nil || d.Histogram == nil {
		return 0, 0
	}
	return d.Histogram.GetSampleCount(), d.Histogram.GetSampleSum()
}

func value(c prometheus.Counter) float64 {
	var d dto.Metric
	if err := c.Write(&d); err != nil || d.Counter == nil {
		return 0
	}
	return d.Counter.GetValue()
}
