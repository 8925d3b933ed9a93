package fanout

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the fanout metrics:
//
//	imledger_fanout_published_total  messages published to other nodes (one per target node)
//	imledger_fanout_received_total   messages received from other nodes
//	imledger_fanout_dropped_total    messages not sent or not delivered, by reason
//	imledger_fanout_errors_total     Redis failures, by operation (nodes, publish)
type metrics struct {
	published prometheus.Counter
	received  prometheus.Counter
	dropped   *prometheus.CounterVec
	errors    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "imledger_fanout_published_total",
			Help: "Messages published to other nodes, one per target node."}),
		received: prometheus.NewCounter(prometheus.CounterOpts{Name: "imledger_fanout_received_total",
			Help: "Messages received from other nodes."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imledger_fanout_dropped_total",
			Help: "Messages not sent to other nodes or not delivered, by reason."}, []string{"reason"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imledger_fanout_errors_total",
			Help: "Redis failures of the fanout, by operation."}, []string{"op"}),
	}
	// The label sets are exported at 0 from the start, so rates and alerts have series.
	for _, reason := range []string{"closed", "queue_full", "bad_payload", "encode"} {
		m.dropped.WithLabelValues(reason)
	}
	for _, op := range []string{"publish", "nodes"} {
		m.errors.WithLabelValues(op)
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.published, m.received, m.dropped, m.errors} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
