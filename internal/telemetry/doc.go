// Package telemetry builds the process logger (log/slog, text or JSON) and the Prometheus
// registry every component registers its metrics on. It holds no global state: cmd/imledger
// creates both and injects them.
package telemetry
