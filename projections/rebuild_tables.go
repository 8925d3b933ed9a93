package projections

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
)

// ReadModel is a read model kept in MySQL tables of each tenant's database, as a TableRebuilder
// rebuilds and verifies it. Its tables are named by the live names with a suffix appended ("" is
// the live tables, "_rebuild" a rebuild's fresh copies, "_verify" a verification's check
// copies). S summarises one part of the read model (a table, or a conversation) and is
// comparable: a live part and a rebuilt one hold the same rows when their summaries are equal.
type ReadModel[S comparable] interface {
	// Projection is the read model's replay name (`imledger replay --projection`). It names the
	// runs' MySQL locks and their reports.
	Projection() string
	// Filter selects the events of tenant that the read model is built from.
	Filter(tenant domain.TenantID) domain.EventFilter
	// CreateLike creates the tables with suffix in db like the live ones, without rows, dropping
	// tables of those names left by an interrupted run first.
	CreateLike(ctx context.Context, db *sql.DB, suffix string) error
	// Drop drops the tables with suffix that exist.
	Drop(ctx context.Context, db *sql.DB, suffix string) error
	// Swap puts the tables with suffix in place of the live ones in one atomic rename, so readers
	// see either every old table or every new one, and drops the old ones.
	Swap(ctx context.Context, db *sql.DB, suffix string) error
	// Apply applies a page of tenant's events, in position order, to the tables with suffix and
	// returns how many were new to them. It must be idempotent (an event applied twice changes
	// nothing the second time): the catch-up after a swap and the live projector may apply the
	// same event.
	Apply(ctx context.Context, tenant domain.TenantID, suffix string, events []domain.Envelope) (int, error)
	// Checksum summarises the tables with suffix part by part; a part that one copy lacks
	// compares as the zero S.
	Checksum(ctx context.Context, tenant domain.TenantID, suffix string) (map[string]S, error)
}

// SwapHook is implemented by a ReadModel with work to do once a rebuild's tables are live, such as
// dropping caches that mirror the old tables. A failure is logged, not returned: the tables are
// swapped in by then.
type SwapHook interface {
	AfterSwap(ctx context.Context, tenant domain.TenantID) error
}

// bulkFiller is a ReadModel with a fill of its own: messages-mysql bulk-loads its fresh tables
// with concurrent writers and catches the swapped-in tables up the same way.
type bulkFiller interface {
	// fill creates the tables with suffix (dropping leftovers) and loads every event of t into
	// them, telling bar about each batch and adding what it read to seen (unless nil).
	fill(ctx context.Context, t domain.TenantID, suffix string, o RebuildOptions, bar ProgressTracker, seen *recentEvents) (filled, error)
	// catchUp applies the events after position from that loaded does not hold to the live tables.
	catchUp(ctx context.Context, t domain.TenantID, from int64, loaded map[uuid.UUID]bool, o RebuildOptions) (int64, error)
}

// filled is the outcome of filling fresh tables: the events applied, the last position read and
// the events read, and what has to be done before the tables are swapped in (nil: nothing).
type filled struct {
	applied, last, read int64
	finish              func(context.Context) error
}

// modelPage is how many events the default fill and catch-up read and apply at a time; the event
// store caps a read at its MaxRead (1000 by default).
const modelPage = 1000

// TableRebuilder rebuilds and verifies one ReadModel from the Postgres event store, tenant by
// tenant. It is the one skeleton every MySQL read model's rebuild shares: a named lock per run,
// fresh tables filled from a filtered read of the log, an atomic swap, the last CatchUpWindow
// positions applied again, the model's post-swap hook, and a verification that rebuilds into
// check tables and compares them part by part with the live ones. It is safe for concurrent
// use; concurrent runs on one tenant's tables are refused (ErrTablesInUse).
type TableRebuilder[S comparable] struct {
	model   ReadModel[S]
	events  EventReader
	tenants TenantDatabases
	log     *slog.Logger
}

// NewTableRebuilder checks its arguments; log nil discards.
func NewTableRebuilder[S comparable](model ReadModel[S], events EventReader, tenants TenantDatabases, log *slog.Logger) (*TableRebuilder[S], error) {
	if model == nil || events == nil || tenants == nil {
		return nil, errors.New("projections: rebuild: a read model, an event reader and tenant databases are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &TableRebuilder[S]{model: model, events: events, tenants: tenants, log: log.With("component", "rebuild")}, nil
}

// Projection returns the replay name of the rebuilt read model.
func (r *TableRebuilder[S]) Projection() string { return r.model.Projection() }

// Rebuild rebuilds the read model for o.Tenant, or every tenant with a database (ErrNoTenants when
// there is none), one tenant after another. Per tenant, under a MySQL named lock on its fresh
// tables (a second rebuild of them, in any process, fails with ErrTablesInUse): tables named with
// o.Suffix are created like the live ones and filled with every event of the model's filter in
// position order, swapped in atomically, and the last o.CatchUpWindow positions before the end of
// the fill are read again, the events the fill did not load (committed late, or appended during
// the rebuild) being applied to the new live tables; then the model's SwapHook runs. Running
// projectors may keep running: what they wrote to the old tables is in the log, hence in the new
// ones, and what they write again is idempotent. o.Projection is ignored.
func (r *TableRebuilder[S]) Rebuild(ctx context.Context, o RebuildOptions) (RebuildResult, error) {
	o.setDefaults()
	o.Projection = r.model.Projection()
	return rebuildTenants(ctx, r.tenants, o, r.log, r.rebuildTenant)
}

func (r *TableRebuilder[S]) rebuildTenant(ctx context.Context, t domain.TenantID, o RebuildOptions) (TenantRebuild, error) {
	start := time.Now()
	name := r.model.Projection()
	db, err := r.tenants.DB(ctx, t)
	if err != nil {
		return TenantRebuild{}, err
	}
	lock, err := lockTables(ctx, db, name, o.Suffix)
	if err != nil {
		return TenantRebuild{}, err
	}
	defer lock.release(context.WithoutCancel(ctx))
	seen := &recentEvents{window: o.CatchUpWindow}
	f, err := r.fill(ctx, db, t, o.Suffix, o, "rebuild "+t.String(), seen)
	if err != nil {
		return TenantRebuild{}, err
	}
	if f.finish != nil {
		if err := f.finish(ctx); err != nil {
			return TenantRebuild{}, err
		}
	}
	if err := r.model.Swap(ctx, db, o.Suffix); err != nil {
		return TenantRebuild{}, err
	}
	from := max(0, f.last-o.CatchUpWindow)
	caught, err := r.catchUp(ctx, t, from, seen.after(from), o)
	if err != nil {
		return TenantRebuild{}, fmt.Errorf("catch up after swap: %w", err)
	}
	if hook, ok := r.model.(SwapHook); ok {
		if err := hook.AfterSwap(ctx, t); err != nil {
			r.log.WarnContext(ctx, "the post-swap step failed; the tables are swapped in", "projection", name,
				"tenant_id", t.String(), "err", err)
		}
	}
	return TenantRebuild{Tenant: t, Events: f.read, Applied: f.applied + caught, Duration: time.Since(start)}, nil
}

// fill creates the tables with suffix in db, t's database, and fills them with every event of t
// the model is built from, with a progress bar labelled label. Events read are added to seen
// unless it is nil.
func (r *TableRebuilder[S]) fill(ctx context.Context, db *sql.DB, t domain.TenantID, suffix string, o RebuildOptions, label string, seen *recentEvents) (filled, error) {
	total, err := r.events.Count(ctx, r.model.Filter(t))
	if err != nil {
		return filled{}, fmt.Errorf("count events: %w", err)
	}
	bar := o.Progress.start(label, total)
	defer func() {
		if bar != nil {
			_ = bar.Finish()
		}
	}()
	if b, ok := r.model.(bulkFiller); ok {
		return b.fill(ctx, t, suffix, o, bar, seen)
	}
	if err := r.model.CreateLike(ctx, db, suffix); err != nil {
		return filled{}, err
	}
	var f filled
	err = readPages(ctx, r.events, r.model.Filter(t), 0, modelPage, func(page []domain.Envelope) error {
		n, err := r.model.Apply(ctx, t, suffix, page)
		if err != nil {
			return err
		}
		f.applied += int64(n)
		f.read += int64(len(page))
		f.last = page[len(page)-1].Position
		if seen != nil {
			seen.add(page)
		}
		if bar != nil {
			_ = bar.Add(len(page))
		}
		return nil
	})
	return f, err
}

// catchUp applies to the live tables the events of t after position from that loaded (the ids of
// the events the fill read there) does not hold.
func (r *TableRebuilder[S]) catchUp(ctx context.Context, t domain.TenantID, from int64, loaded map[uuid.UUID]bool, o RebuildOptions) (int64, error) {
	if b, ok := r.model.(bulkFiller); ok {
		return b.catchUp(ctx, t, from, loaded, o)
	}
	var applied int64
	err := readPages(ctx, r.events, r.model.Filter(t), from, modelPage, func(page []domain.Envelope) error {
		missed := unseen(page, loaded)
		if len(missed) == 0 {
			return nil
		}
		n, err := r.model.Apply(ctx, t, "", missed)
		applied += int64(n)
		return err
	})
	return applied, err
}

// unseen returns the events of page whose ids loaded does not hold, in order.
func unseen(page []domain.Envelope, loaded map[uuid.UUID]bool) []domain.Envelope {
	missed := page[:0:0]
	for _, e := range page {
		if !loaded[e.EventID] {
			missed = append(missed, e)
		}
	}
	return missed
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

// ModelVerifyResult is the outcome of TableRebuilder.Verify.
type ModelVerifyResult[S comparable] struct {
	Tenant  domain.TenantID
	Events  int64        // events replayed into the check tables
	Parts   int          // parts compared
	Live    map[string]S // the live summaries, by part
	Rebuilt map[string]S // the check tables' summaries, by part
	Diffs   []PartDiff[S]
}

// OK reports whether the live read model matched the rebuild.
func (v ModelVerifyResult[S]) OK() bool { return len(v.Diffs) == 0 }

// Report writes the outcome to out as `imledger replay --verify` prints it: one line naming the
// tenant, the projection and the events replayed, and one more line per part that differs.
func (v ModelVerifyResult[S]) Report(out io.Writer, projection string) {
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
// check tables. It writes nothing to o.Out (see ModelVerifyResult.Report). One verification of a
// tenant's read model runs at a time: while another holds the check tables (in any process) the
// error wraps ErrTablesInUse and nothing is touched. Events the live projector has not applied
// yet show up as differences, so verify a quiet tenant or read the result with the projection
// lag in mind.
func (r *TableRebuilder[S]) Verify(ctx context.Context, o VerifyOptions) (ModelVerifyResult[S], error) {
	if o.Tenant.IsZero() {
		return ModelVerifyResult[S]{}, errors.New("projections: verify: tenant is required")
	}
	db, err := r.tenants.DB(ctx, o.Tenant)
	if err != nil {
		return ModelVerifyResult[S]{}, fmt.Errorf("projections: verify: %w", err)
	}
	res, err := r.verify(ctx, db, o)
	if err != nil {
		return res, fmt.Errorf("projections: verify tenant %s: %w", o.Tenant, err)
	}
	return res, nil
}

func (r *TableRebuilder[S]) verify(ctx context.Context, db *sql.DB, o VerifyOptions) (ModelVerifyResult[S], error) {
	res := ModelVerifyResult[S]{Tenant: o.Tenant}
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
