package readmodels

import "fmt"

// TableSummary summarises one read-model table so that two copies of it (the live table and a
// rebuild from the event log) can be compared: equal summaries mean, with overwhelming
// probability, equal rows.
type TableSummary struct {
	Rows     int64  // rows in the table
	Checksum uint64 // XOR of a 64-bit hash of every row; order-independent
}

// String formats the summary as the verification reports print it.
func (s TableSummary) String() string {
	return fmt.Sprintf("rows=%d checksum=%016x", s.Rows, s.Checksum)
}
