// Package layering holds the tests that keep imledger's structure walkable: an allowed-imports
// table per top-level folder (transport → commands → domain, projections → readmodels → domain,
// cmd/imledger the only place that wires them together), production and test files alike, and a
// ceiling on the length of functions. It has no code of its own; the rules live in its tests.
package layering
