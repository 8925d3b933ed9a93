package testenv

import (
	"context"
	"testing"
	"time"
)

// Context returns a context that ends with the test or after two minutes, so a test stuck on a
// service fails with a deadline instead of hanging until the go test timeout.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
