package replay

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/imledger/imledger/domain"
)

// VerifyOptions says which tenant's read model to check.
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

// PartDiff is a part of a read model (a table, or a conversation) whose live summary differs from
// a rebuild's. A side that lacks the part has the zero summary.
type PartDiff[S comparable] struct {
	Part    string
	Live    S
	Rebuilt S
}

func (d PartDiff[S]) String() string {
	return fmt.Sprintf("%s: live %v; rebuilt %v", d.Part, d.Live, d.Rebuilt)
}

// Verification is the outcome of Rebuilder.Verify.
type Verification[S comparable] struct {
	Tenant  domain.TenantID
	Events  int64        // events replayed into the check tables
	Parts   int          // parts compared
	Live    map[string]S // the live summaries, by part
	Rebuilt map[string]S // the check tables' summaries, by part
	Diffs   []PartDiff[S]
}

// OK reports whether the live read model matched the rebuild.
func (v Verification[S]) OK() bool { return len(v.Diffs) == 0 }

// Reporter is implemented by a Model whose verification reads better in words of its own (the
// conversations of messages-mysql): Report writes v to out in place of Verification.Report.
type Reporter[S comparable] interface {
	Report(out io.Writer, v Verification[S])
}

// Report writes the outcome to out as `imledger replay --verify` prints it: one line naming the
// tenant, the projection and the events replayed, and one more line per part that differs.
func (v Verification[S]) Report(out io.Writer, projection string) {
	if v.OK() {
		parts := make([]string, 0, len(v.Live))
		for _, p := range sortedKeys(v.Live, nil) {
			parts = append(parts, fmt.Sprintf("%s %v", p, v.Live[p]))
		}
		fmt.Fprintf(out, "tenant %s: %s matches a rebuild from %d events (%s)\n", v.Tenant, projection, v.Events, strings.Join(parts, ", "))
		return
	}
	fmt.Fprintf(out, "tenant %s: %d of %d %s parts differ from a rebuild from %d events\n", v.Tenant, len(v.Diffs), v.Parts,
		projection, v.Events)
	for _, d := range v.Diffs {
		fmt.Fprintf(out, "  %s\n", d)
	}
}

// Verify rebuilds o.Tenant's read model from the event store into check tables (suffix
// "_verify"), compares the summaries of their parts with the live tables' (Checksum) and drops the
// check tables, then writes the outcome to o.Out unless it is nil (the model's Reporter, or
// Verification.Report). One verification of a tenant's read model runs at a time: while another holds the check tables (in any process) the
// error wraps ErrTablesInUse and nothing is touched. Events the live projector has not applied
// yet show up as differences, so verify a quiet tenant or read the result with the projection
// lag in mind.
func (r *Rebuilder[S]) Verify(ctx context.Context, o VerifyOptions) (Verification[S], error) {
	if o.Tenant.IsZero() {
		return Verification[S]{}, errors.New("projections: verify: tenant is required")
	}
	db, err := r.tenants.DB(ctx, o.Tenant)
	if err != nil {
		return Verification[S]{}, fmt.Errorf("projections: verify: %w", err)
	}
	res, err := r.verify(ctx, db, o)
	if err != nil {
		return res, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	if o.Out == nil {
		return res, nil
	}
	if rep, ok := r.model.(Reporter[S]); ok {
		rep.Report(o.Out, res)
	} else {
		res.Report(o.Out, r.model.Projection())
	}
	return res, nil
}

func (r *Rebuilder[S]) verify(ctx context.Context, db *sql.DB, o VerifyOptions) (Verification[S], error) {
	res := Verification[S]{Tenant: o.Tenant}
	lock, err := lockTables(ctx, db, r.model.Projection(), verifySuffix)
	if err != nil {
		return res, err
	}
	defer lock.release(context.WithoutCancel(ctx))
	defer func() { _ = r.model.Drop(context.WithoutCancel(ctx), db, verifySuffix) }()
	ro := RebuildOptions{BatchSize: o.BatchSize, Suffix: verifySuffix, Progress: o.Progress}
	ro.setDefaults()
	// The check tables are only summarised and dropped: a fill's finishing step (a bulk load's
	// secondary indexes) is skipped.
	f, err := r.fill(ctx, db, o.Tenant, verifySuffix, ro, "verify "+o.Tenant.String(), nil)
	if err != nil {
		return res, err
	}
	res.Events = f.read
	if res.Live, err = r.model.Checksum(ctx, o.Tenant, ""); err != nil {
		return res, err
	}
	if res.Rebuilt, err = r.model.Checksum(ctx, o.Tenant, verifySuffix); err != nil {
		return res, err
	}
	parts := sortedKeys(res.Live, res.Rebuilt)
	res.Parts = len(parts)
	for _, p := range parts {
		if l, b := res.Live[p], res.Rebuilt[p]; l != b {
			res.Diffs = append(res.Diffs, PartDiff[S]{Part: p, Live: l, Rebuilt: b})
		}
	}
	return res, nil
}

// sortedKeys returns the keys of a and b, each once, sorted.
func sortedKeys[S any](a, b map[string]S) []string {
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
