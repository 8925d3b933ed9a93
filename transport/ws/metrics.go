package ws

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway metrics:
//
//	imledger_ws_connections           open connections
//	imledger_ws_frame_seconds         client frames by type (its _count) and the time to handle
//	                                  one (a pub: until its ack is queued)
//	imledger_ws_refused_total         refused frames and handshakes, by reason
//	imledger_ws_disconnects_total     closed connections, by cause
type metrics struct {
	connections prometheus.Gauge
	frameTime   *prometheus.HistogramVec
	frameTypes  map[string]prometheus.Observer // frameTime's series of each known type
	unknownType prometheus.Observer            // … and of every other type
	refused     *prometheus.CounterVec
	disconnects *prometheus.CounterVec
}

// frameTypes are the client frame types; any other is counted as "unknown".
var frameTypes = []string{"hi", "login", "sub", "leave", "pub", "get", "note", "ping"}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "imledger_ws_connections",
			Help: "Open WebSocket connections."}),
		frameTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "imledger_ws_frame_seconds",
			Help:    "Time to handle a client frame, by type; a pub's ends when its ack is queued.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}, []string{"type"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imledger_ws_refused_total",
			Help: "Refused client frames and handshakes, by reason."}, []string{"reason"}),
		disconnects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imledger_ws_disconnects_total",
			Help: "Closed connections, by cause."}, []string{"cause"}),
	}
	m.frameTypes = make(map[string]prometheus.Observer, len(frameTypes))
	for _, t := range frameTypes {
		m.frameTypes[t] = m.frameTime.WithLabelValues(t)
	}
	m.unknownType = m.frameTime.WithLabelValues("unknown")
	// The causes of disconnects and the handshake refusals are exported at 0 from the start.
	for _, c := range []closeCause{closeClient, closeGone, closeGoingAway, closeIdle, closeLoginTimeout, closeTooLarge,
		closeBadUTF8, closeProtocol, closeBinary, closeSlow, closeWriteFailed, closeInternal, {label: labelEnded}} {
		m.disconnects.WithLabelValues(c.label)
	}
	for _, reason := range []string{"origin", "max_connections", "handshake", ReasonFrameTooLarge} {
		m.refused.WithLabelValues(reason)
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.connections, m.frameTime, m.refused, m.disconnects} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}

// frameObserver returns the frame-time series of a client frame type.
func (m *metrics) frameObserver(typ string) prometheus.Observer {
	if o, ok := m.frameTypes[typ]; ok {
		return o
	}
	return m.unknownType
}
