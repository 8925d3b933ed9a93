//go:build !race

package ws_test

// timingFactor stretches the latency bounds of timing tests; 1 without the race detector.
const timingFactor = 1
