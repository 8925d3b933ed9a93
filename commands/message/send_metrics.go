package message

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// sendMetrics are the sequencer's metrics:
//
//	imledger_send_stage_seconds{stage}   one batch's Redis round trip (allocate: claims, seqs and
//	                                     the previous batch's done marks) and event-store append
//	imledger_send_batch_sends            sends per batch
type sendMetrics struct {
	stage    *prometheus.HistogramVec
	allocate prometheus.Observer // stage's series, resolved once
	append   prometheus.Observer
	batch    prometheus.Histogram
}

func newSendMetrics(reg prometheus.Registerer) (*sendMetrics, error) {
	m := &sendMetrics{
		stage: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "imledger_send_stage_seconds",
			Help:    "Time of one sequencer batch's stage: allocate (Redis) or append (event store).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}}, []string{"stage"}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "imledger_send_batch_sends",
			Help:    "Sends per sequencer batch.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512}}),
	}
	m.allocate, m.append = m.stage.WithLabelValues("allocate"), m.stage.WithLabelValues("append")
	if reg == nil {
		return m, nil
	}
	return m, errors.Join(reg.Register(m.stage), reg.Register(m.batch))
}

// since records the time since start in o.
func since(o prometheus.Observer, start time.Time) { o.Observe(time.Since(start).Seconds()) }
