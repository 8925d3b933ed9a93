package readmodels

import "errors"

// ErrNotProvisioned marks a failure of a tenant's read model because its database, or a table
// of it, does not exist: the tenant passed the registry, but its MySQL database was never made,
// was dropped or is broken. It is the operator's to repair (`imledger tenant create` again); a
// request meanwhile is answered as with an unreachable dependency (503 retry), never as an
// unknown entity or an internal error.
var ErrNotProvisioned = errors.New("tenant read model not provisioned")
