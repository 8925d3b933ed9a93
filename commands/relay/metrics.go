package relay

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the relay's Prometheus series, all labelled with the relay name.
type metrics struct {
	events        *prometheus.CounterVec // by topic
	batches       prometheus.Counter
	publishErrors prometheus.Counter
	storeErrors   prometheus.Counter
	lastPosition  prometheus.Gauge
	lagSeconds    prometheus.Gauge
	leader        prometheus.Gauge
	blocked       prometheus.Gauge
	batchSeconds  prometheus.Histogram
	term          prometheus.Gauge
	skips         prometheus.Counter
	openGapSeqs   prometheus.Gauge
	republishes   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, name string) (*metrics, error) {
	labels := prometheus.Labels{"relay": name}
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imledger_relay_events_total", ConstLabels: labels,
			Help: "Events published to Kafka and checkpointed, by topic.",
		}, []string{"topic"}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "imledger_relay_batches_total", ConstLabels: labels,
			Help: "Batches published to Kafka and checkpointed.",
		}),
		publishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "imledger_relay_publish_errors_total", ConstLabels: labels,
			Help: "Failed batch sends to Kafka; the batch is retried and the checkpoint stays.",
		}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "imledger_relay_store_errors_total", ConstLabels: labels,
			Help: "Failed event store reads and checkpoint loads or saves; they are retried.",
		}),
		lastPosition: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "imledger_relay_last_position", ConstLabels: labels,
			Help: "Position of the last event published and checkpointed.",
		}),
		lagSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "imledger_relay_lag_seconds", ConstLabels: labels,
			Help: "Age of the last event of the last published batch when it was acked; 0 when caught up.",
		}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "imledger_relay_leader", ConstLabels: labels,
			Help: "1 while this process holds the relay's advisory lock and publishes, else 0.",
		}),
		blocked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "imledger_relay_blocked", ConstLabels: labels,
			Help: "1 while the relay is stopped at an event whose type this build does not know.",
		}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "imledger_relay_batch_seconds", ConstLabels: labels,
			Help:    "Time to publish one batch and save its checkpoint.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		term: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "imledger_relay_term", ConstLabels: labels,
			Help: "The term this process leads or last led; each new active relay increments it.",
		}),
		skips: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "imledger_relay_seq_skips_total", ConstLabels: labels,
			Help: "Seq-skip markers the gap sweeper appended for conversation seqs missing past the deadline.",
		}),
		openGapSeqs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "imledger_relay_open_gap_seqs", ConstLabels: labels,
			Help: "Conversation seqs the gap sweeper sees missing below a published seq, not yet final.",
		}),
		republishes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "imledger_relay_republishes_total", ConstLabels: labels,
			Help: "Republishes from the first event because Kafka lacked records it had acknowledged.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.events, m.batches, m.publishErrors, m.storeErrors,
		m.lastPosition, m.lagSeconds, m.leader, m.blocked, m.batchSeconds, m.term, m.skips, m.openGapSeqs, m.republishes} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("relay: register metrics: %w", err)
	}
	return m, nil
}
