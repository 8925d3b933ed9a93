//go:build race

package ws_test

// timingFactor stretches the latency bounds of timing tests: the race detector makes the whole
// send path several times slower.
const timingFactor = 4
