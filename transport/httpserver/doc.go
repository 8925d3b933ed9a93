// Package httpserver serves the operations endpoints every imledger node exposes: /healthz (the
// process is alive), /readyz (its dependencies answer) and /metrics (Prometheus). The checks and
// the registry are injected; the package opens no connections of its own.
package httpserver
