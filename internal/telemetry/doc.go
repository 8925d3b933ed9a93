// Package telemetry builds the process logger (log/slog, text or JSON), the Prometheus registry
// every component registers its metrics on, and the counter of recovered panics the components
// share. It holds no global state: cmd/imledger creates them and injects them.
package telemetry
