package projections

import (
	"context"
	"fmt"
	"io"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// VerifyOptions says which tenant's MySQL read model to check.
type VerifyOptions struct {
	// Tenant is required.
	Tenant domain.TenantID
	// Out receives the report; nil discards it.
	Out io.Writer
	// Progress is told how the rebuild's pass over the event log advances; nil reports nothing.
	Progress Progress
	// BatchSize is as for RebuildOptions.
	BatchSize int
}

// TopicDiff is a topic whose live read model differs from a rebuild. A side that lacks the topic
// has a zero summary.
type TopicDiff struct {
	Topic   string
	Live    msgstore.TopicSummary
	Rebuilt msgstore.TopicSummary
}

func (d TopicDiff) String() string {
	return fmt.Sprintf("%s: live rows=%d deletions=%d read_marks=%d checksum=%016x; rebuilt rows=%d deletions=%d read_marks=%d checksum=%016x",
		d.Topic, d.Live.Rows, d.Live.Deletions, d.Live.ReadMarks, d.Live.Checksum,
		d.Rebuilt.Rows, d.Rebuilt.Deletions, d.Rebuilt.ReadMarks, d.Rebuilt.Checksum)
}

// VerifyResult is the outcome of Verify.
type VerifyResult struct {
	Tenant domain.TenantID
	Events int64 // events replayed into the check tables
	Topics int   // topics compared
	Diffs  []TopicDiff
}

// OK reports whether the live read model matched the rebuild.
func (v VerifyResult) OK() bool { return len(v.Diffs) == 0 }

// Verify rebuilds a tenant's MySQL read model from the event store into check tables (suffix
// "_verify"), compares row counts and per-topic checksums (msgstore.Checksum) with the live
// tables, writes the differences to Out, and drops the check tables (TableRebuilder.Verify). One
// verification of a tenant runs at a time: while another holds the check tables (in any process)
// the error wraps ErrTablesInUse and nothing is touched. Events the live projector has not
// applied yet show up as differences, so verify a quiet tenant or read the result with the
// projection lag in mind.
func (r *Rebuilder) Verify(ctx context.Context, o VerifyOptions) (VerifyResult, error) {
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	mr, err := r.messages().Verify(ctx, o)
	if err != nil {
		return VerifyResult{}, err
	}
	res := VerifyResult{Tenant: o.Tenant, Events: mr.Events, Topics: mr.Parts}
	for _, d := range mr.Diffs {
		res.Diffs = append(res.Diffs, TopicDiff{Topic: d.Part, Live: d.Live, Rebuilt: d.Rebuilt})
	}
	if res.OK() {
		fmt.Fprintf(out, "tenant %s: %d topics match a rebuild from %d events\n", o.Tenant, res.Topics, res.Events)
		return res, nil
	}
	fmt.Fprintf(out, "tenant %s: %d of %d topics differ from a rebuild from %d events\n", o.Tenant, len(res.Diffs), res.Topics, res.Events)
	for _, d := range res.Diffs {
		fmt.Fprintf(out, "  %s\n", d)
	}
	return res, nil
}
