package projections

import (
	"context"
	"fmt"
	"io"
	"sort"

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
// tables, writes the differences to Out, and drops the check tables. One verification of a
// tenant runs at a time: while another holds the check tables (in any process) the error wraps
// ErrTablesInUse and nothing is touched. Events the live projector has not applied yet show up
// as differences, so verify a quiet tenant or read the result with the projection lag in mind.
func (r *Rebuilder) Verify(ctx context.Context, o VerifyOptions) (VerifyResult, error) {
	if o.Tenant.IsZero() {
		return VerifyResult{}, fmt.Errorf("projections: verify: tenant is required")
	}
	out := o.Out
	if out == nil {
		out = io.Discard
	}
	ro := RebuildOptions{BatchSize: o.BatchSize, Suffix: verifySuffix, Progress: o.Progress}
	ro.setDefaults()
	db, err := r.d.Tenants.DB(ctx, o.Tenant)
	if err != nil {
		return VerifyResult{}, fmt.Errorf("projections: verify: %w", err)
	}
	lock, err := lockTables(ctx, db, ProjectionMessagesMySQL, ro.Suffix)
	if err != nil {
		return VerifyResult{}, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	defer lock.release(context.WithoutCancel(ctx))
	check := msgstore.DefaultTables().WithSuffix(ro.Suffix)
	defer func() { _ = msgstore.DropTables(context.WithoutCancel(ctx), db, check) }()
	// The check tables are only checksummed and dropped, so their secondary indexes are never
	// added (the load is not finished).
	_, _, _, events, err := r.fillTables(ctx, o.Tenant, check, ro, "verify "+o.Tenant.String(), nil)
	if err != nil {
		return VerifyResult{}, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	live, err := r.d.Messages.Checksum(ctx, o.Tenant, msgstore.DefaultTables())
	if err != nil {
		return VerifyResult{}, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	rebuilt, err := r.d.Messages.Checksum(ctx, o.Tenant, check)
	if err != nil {
		return VerifyResult{}, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	res := VerifyResult{Tenant: o.Tenant, Events: events, Diffs: compareSummaries(live, rebuilt)}
	res.Topics = len(unionKeys(live, rebuilt))
	if res.OK() {
		fmt.Fprintf(out, "tenant %s: %d topics match a rebuild from %d events\n", o.Tenant, res.Topics, events)
		return res, nil
	}
	fmt.Fprintf(out, "tenant %s: %d of %d topics differ from a rebuild from %d events\n", o.Tenant, len(res.Diffs), res.Topics, events)
	for _, d := range res.Diffs {
		fmt.Fprintf(out, "  %s\n", d)
	}
	return res, nil
}

// compareSummaries returns the topics whose summaries differ, sorted by topic.
func compareSummaries(live, rebuilt map[string]msgstore.TopicSummary) []TopicDiff {
	var diffs []TopicDiff
	for _, topic := range unionKeys(live, rebuilt) {
		if l, b := live[topic], rebuilt[topic]; l != b {
			diffs = append(diffs, TopicDiff{Topic: topic, Live: l, Rebuilt: b})
		}
	}
	return diffs
}

func unionKeys(a, b map[string]msgstore.TopicSummary) []string {
	seen := make(map[string]bool, len(a)+len(b))
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
