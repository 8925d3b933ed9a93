package ws

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the gateway metrics:
//
//	imledger_ws_connections           open connections
//	imledger_ws_frames_total          client frames by type
//	imledger_ws_refused_total         refused frames and handshakes, by reason
//	imledger_ws_disconnects_total     closed connections, by cause
//	imledger_ws_frame_seconds         time to handle a client frame (a pub: until its ack is queued), by type
type metrics struct {
	connections prometheus.Gauge
	frames      *prometheus.CounterVec
	frameTime   *prometheus.HistogramVec
	refused     *prometheus.CounterVec
	disconnects *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "imledger_ws_connections",
			Help: "Open WebSocket connections."}),
		frames: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imledger_ws_frames_total",
			Help: "Client frames received, by type."}, []string{"type"}),
		frameTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "imledger_ws_frame_seconds",
			Help:    "Time to handle a client frame, by type; a pub's ends when its ack is queued.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}}, []string{"type"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imledger_ws_refused_total",
			Help: "Refused client frames and handshakes, by reason."}, []string{"reason"}),
		disconnects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imledger_ws_disconnects_total",
			Help: "Closed connections, by cause."}, []string{"cause"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.connections, m.frames, m.frameTime, m.refused, m.disconnects} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}
