package push

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the push counters (seed 000 §11: Push 触发数、成功数和失败数).
type Metrics struct {
	// Triggered counts tasks produced to im.message.push.
	Triggered prometheus.Counter
	// Sent counts reminders a provider accepted (one per device).
	Sent prometheus.Counter
	// Failed counts reminders given up on after the retries (one per device).
	Failed prometheus.Counter
	// Coalesced counts tasks folded into another task's reminder.
	Coalesced prometheus.Counter
	// Dropped counts tasks never produced, by reason (queue_full, lookup_failed, publish_failed).
	Dropped *prometheus.CounterVec
	// Deduped counts tasks seen again within the dedupe TTL.
	Deduped prometheus.Counter
}

// NewMetrics makes the counters and registers them with reg when it is not nil. Registering the
// same names twice fails.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Triggered: prometheus.NewCounter(prometheus.CounterOpts{Name: "imledger_push_triggered_total", Help: "Offline push tasks produced to im.message.push."}),
		Sent:      prometheus.NewCounter(prometheus.CounterOpts{Name: "imledger_push_sent_total", Help: "Reminders a push provider accepted, one per device."}),
		Failed:    prometheus.NewCounter(prometheus.CounterOpts{Name: "imledger_push_failed_total", Help: "Reminders given up on after the retries, one per device."}),
		Coalesced: prometheus.NewCounter(prometheus.CounterOpts{Name: "imledger_push_coalesced_total", Help: "Push tasks folded into another task's reminder."}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imledger_push_dropped_total",
			Help: "Push tasks not produced, by reason."}, []string{"reason"}),
		Deduped: prometheus.NewCounter(prometheus.CounterOpts{Name: "imledger_push_deduped_total", Help: "Push tasks seen again within the dedupe TTL."}),
	}
	if reg != nil {
		var errs []error
		for _, c := range []prometheus.Collector{m.Triggered, m.Sent, m.Failed, m.Coalesced, m.Dropped, m.Deduped} {
			errs = append(errs, reg.Register(c))
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	return m, nil
}
