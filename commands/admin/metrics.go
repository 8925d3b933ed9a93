package admin

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/imledger/imledger/domain"
)

// metrics are the consumer's Prometheus series.
type metrics struct {
	commands    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	retries     prometheus.Counter
	deadLetters prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imledger_admin_commands_total",
			Help: "Admin commands answered, by command type and status (succeeded, rejected, failed).",
		}, []string{"type", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "imledger_admin_command_seconds",
			Help:    "Time from taking an admin command to its answer, by command type.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"type"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "imledger_admin_command_retries_total",
			Help: "Attempts of admin commands that failed transiently and were tried again.",
		}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "imledger_admin_command_dead_letters_total",
			Help: "Admin commands dead-lettered after their retries (answered failed).",
		}),
	}
	// Every type and status is exported at 0 from the start, so rates and alerts have series.
	types := []string{"unknown"}
	for _, c := range domain.AdminCommands() {
		types = append(types, string(c.Type))
	}
	for _, typ := range types {
		for _, status := range []string{domain.AdminSucceeded, domain.AdminRejected, domain.AdminFailed} {
			m.commands.WithLabelValues(typ, status)
		}
		m.duration.WithLabelValues(typ)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.commands, m.duration, m.retries, m.deadLetters} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
		}
	}
	return m, nil
}
