// Package layering holds the test that keeps imledger's arrows pointing down:
// transport → commands → domain, projections → readmodels → domain, with
// cmd/imledger the only place that wires them together. It has no code of its
// own; the rules live in layering_test.go.
package layering
