package export

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/progress"
)

// Reader is what an export needs of the event store (*eventstore.Store).
type Reader interface {
	// Horizon returns the oldest transaction id still running: events below it are final.
	Horizon(ctx context.Context) (uint64, error)
	// CountCommitted counts the events of f in r.
	CountCommitted(ctx context.Context, r eventstore.Range, f eventstore.Filter) (int64, error)
	// ScanCommitted hands the events of f in r to fn in commit-safe order, page by page.
	ScanCommitted(ctx context.Context, r eventstore.Range, f eventstore.Filter, page int, fn func([]eventstore.Record) error) error
}

// Run exports the events cfg selects and returns what it wrote.
//
// It fixes a horizon first (Reader.Horizon) and reads the events after the start cursor written by
// transactions below it, in (tx_id, position) order: the order the relay publishes in, in which a
// transaction that commits late is never skipped. Result.Cursor is HorizonCursor(horizon) (or
// cfg.To), so the next export from it gets exactly the events committed since, none twice. The
// cursor describes how far the log was read, not which events matched: resume with the same
// filters. Reading runs ahead of writing by four pages, so memory holds about five pages plus,
// for Parquet, one row group, whatever the number of events.
//
// Errors: the configuration's (domain.ErrInvalid for bad type globs, for a start cursor past
// the end of the log: eventstore.Range.CheckFrom, and for a directory that holds an export of other
// filters, in another format or up to another cursor than a given From), the store's (wrapping
// domain.ErrRetryable when PostgreSQL is unreachable), file system errors, and a payload an
// upcaster cannot read. A refused export creates no directory, output file or cursor. A failed
// export removes its unfinished file; parts of a directory committed before the failure stay,
// with the cursor after them.
func Run(ctx context.Context, r Reader, cfg Config) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	cfg.setDefaults()
	start := cfg.Now()
	types, err := SelectTypes(cfg.Types, !cfg.AsStored)
	if err != nil {
		return Result{}, err
	}
	if !cfg.From.IsZero() {
		// Refuse a start cursor past the log before the output is created or locked: a refused
		// export leaves nothing behind. A directory's saved cursor is checked once it is locked.
		if err := checkFrom(ctx, r, cfg.From); err != nil {
			return Result{}, err
		}
	}
	t, err := openTarget(cfg)
	if err != nil {
		return Result{}, err
	}
	defer t.release()
	from := cfg.From
	if t.dir != "" {
		if c, filters, ok, err := readCursorFile(t.cursor); err != nil {
			return Result{}, err
		} else if ok {
			if filters != "" && filters != cfg.filters() {
				// Its cursor says where that export stopped, which events of these filters
				// before it were never read: resuming from it would skip them.
				return Result{}, &domain.ValidationError{Field: "out", Reason: "filters_differ", Detail: fmt.Sprintf(
					"%s holds an export with filters %s, not %s: resume it with the same filters, or export into another directory",
					t.dir, filters, cfg.filters())}
			}
			if !from.IsZero() && from != c {
				// The directory holds the events up to its cursor: an earlier start would write
				// some again, a later one would leave a gap.
				return Result{}, &domain.ValidationError{Field: "from", Reason: "cursor_differs", Detail: fmt.Sprintf(
					"%s holds an export up to %s, not %s: leave the start cursor out to resume it, or export into another directory",
					t.dir, c, from)}
			}
			from = c
			cfg.Logger.InfoContext(ctx, "resuming the export of a directory", "dir", t.dir, "cursor", c.String())
		}
	}
	horizon, err := r.Horizon(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("export: %w", err)
	}
	rng := eventstore.Range{From: from, To: cfg.To, Horizon: horizon}
	if err := rng.CheckFrom(); err != nil {
		return Result{}, fmt.Errorf("export: %w", err)
	}
	filter := eventstore.Filter{Tenant: cfg.Tenant, EventTypes: types, Since: cfg.Since, Until: cfg.Until}
	var bar *progressbar.ProgressBar
	if cfg.Progress != nil {
		total, err := r.CountCommitted(ctx, rng, filter)
		if err != nil {
			return Result{}, fmt.Errorf("export: %w", err)
		}
		bar = progress.Bar(cfg.Progress, total, "export")
	}
	events, err := pump(ctx, r, rng, filter, cfg, t, bar)
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		t.abort()
		return Result{}, err
	}
	end := rng.End()
	if err := t.finish(end); err != nil {
		t.abort()
		return Result{}, err
	}
	res := Result{Events: events, Files: t.files, Cursor: end, CursorFile: t.cursor, Duration: cfg.Now().Sub(start)}
	cfg.Logger.InfoContext(ctx, "exported events", "events", events, "files", len(res.Files), "cursor", end.String(),
		"range", rng.String(), "duration", res.Duration)
	return res, nil
}

// checkFrom returns the error of a start cursor past the end of the log (eventstore.Range.CheckFrom).
func checkFrom(ctx context.Context, r Reader, from eventstore.Cursor) error {
	horizon, err := r.Horizon(ctx)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := (eventstore.Range{From: from, Horizon: horizon}).CheckFrom(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// pump reads pages on one goroutine and writes them on this one.
func pump(ctx context.Context, r Reader, rng eventstore.Range, f eventstore.Filter, cfg Config, t *target, bar *progressbar.ProgressBar) (int64, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	pages := make(chan []eventstore.Record, 4)
	readErr := make(chan error, 1)
	go func() {
		defer close(pages)
		hand := func(recs []eventstore.Record) error {
			select {
			case pages <- recs:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		if sp, ok := r.(Splitter); ok && cfg.Readers > 1 {
			readErr <- scanParallel(ctx, r, sp, rng, f, cfg.PageSize, cfg.Readers, cfg.ChunkEvents, hand)
			return
		}
		readErr <- r.ScanCommitted(ctx, rng, f, cfg.PageSize, hand)
	}()
	var events int64
	var werr error
	for recs := range pages {
		if werr != nil {
			continue // drain so the reader ends
		}
		if err := prepare(ctx, recs, cfg); err != nil {
			werr = err
			cancel(err)
			continue
		}
		if err := t.write(recs); err != nil {
			werr = err
			cancel(err)
			continue
		}
		events += int64(len(recs))
		if bar != nil {
			_ = bar.Add(len(recs))
		}
	}
	if rerr := <-readErr; werr == nil && rerr != nil {
		return events, fmt.Errorf("export: %w", rerr)
	}
	return events, werr
}

// filters is the record of the filters of c that a resumed export must repeat, as a line of JSON.
func (c Config) filters() string {
	types := slices.Clone(c.Types)
	slices.Sort(types)
	f := struct {
		Tenant   string   `json:"tenant,omitempty"`
		Types    []string `json:"types,omitempty"`
		Since    string   `json:"since,omitempty"`
		Until    string   `json:"until,omitempty"`
		AsStored bool     `json:"as_stored,omitempty"`
	}{Types: slices.Compact(types), AsStored: c.AsStored}
	if !c.Tenant.IsZero() {
		f.Tenant = c.Tenant.String()
	}
	if !c.Since.IsZero() {
		f.Since = c.Since.UTC().Format(time.RFC3339Nano)
	}
	if !c.Until.IsZero() {
		f.Until = c.Until.UTC().Format(time.RFC3339Nano)
	}
	b, _ := json.Marshal(f)
	return string(b)
}

// prepare upcasts recs to the current versions of their types (unless cfg.AsStored) and opens
// their sealed values with cfg.Opener, in place.
func prepare(ctx context.Context, recs []eventstore.Record, cfg Config) error {
	for i := range recs {
		e := recs[i].Envelope
		var err error
		if !cfg.AsStored {
			e, err = domain.Upcast(e)
		}
		if err == nil {
			e, err = domain.OpenEnvelope(ctx, e, cfg.Opener)
		}
		if err != nil {
			return fmt.Errorf("export: event at %s: %w", recs[i].Cursor, err)
		}
		recs[i].Envelope = e
	}
	return nil
}
