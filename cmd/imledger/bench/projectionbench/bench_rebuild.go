package projectionbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/replay"
)

// EventAppender writes events at their own stream versions (commands/eventstore.Store).
type EventAppender interface {
	AppendBatch(ctx context.Context, events []domain.Envelope) ([]eventstore.AppendResult, error)
}

// RebuildDeps are the collaborators of the timed rebuild.
type RebuildDeps struct {
	// Events is the event log the rebuild reads; it must also be an EventAppender to seed.
	Events replay.EventReader
	// Tenants finds the tenant's database.
	Tenants replay.TenantDatabases
	// Messages is the message store rebuilt.
	Messages replay.MessageRebuildStore
	// Logger receives the rebuild's logs; nil discards them.
	Logger *slog.Logger
}

// BenchRebuildOptions configures BenchRebuild.
type BenchRebuildOptions struct {
	// Deps are the rebuild's collaborators; Events must also be an EventAppender to seed.
	Deps RebuildDeps
	// Postgres, if set, is the event store's database: before timing, its events table is
	// vacuumed and analyzed, as autovacuum would have done before any real rebuild. Without
	// statistics that count the seeded rows, PostgreSQL may plan each page of the rebuild's
	// reads as a sort of all the tenant's remaining events, and autovacuum may start on the
	// seeded rows while the rebuild is timed.
	Postgres *pgxpool.Pool
	// Tenant is rebuilt; it must be provisioned. Use a fresh tenant.
	Tenant domain.TenantID
	// Events is how many group messages the tenant's history holds. If it has fewer message
	// events, the missing ones are appended first (not timed). Default 200000.
	Events int
	// Topics is how many group conversations seeded events are spread over. Default 100.
	Topics int
	// BatchSize is replay.RebuildOptions.BatchSize.
	BatchSize int
	// Workers is replay.RebuildOptions.Workers.
	Workers int
	// Out receives what is being done and the result; nil discards.
	Out io.Writer
	// Progress reports the timed rebuild's pass; nil reports nothing.
	Progress replay.Progress
	// Keys, when set, seals the seeded events' content (as serve writes it) and opens what the
	// rebuild reads (as replay does), so the rebuild pays for opening.
	Keys interface {
		domain.Sealer
		domain.Opener
	}
}

// BenchRebuild measures Rebuild of messages-mysql for one tenant from the event store and
// returns its throughput in events read and applied per second.
func BenchRebuild(ctx context.Context, o BenchRebuildOptions) (BenchResult, error) {
	if o.Events <= 0 {
		o.Events = 200_000
	}
	if o.Topics <= 0 {
		o.Topics = 100
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Deps.Logger == nil {
		o.Deps.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	events := o.Deps.Events
	if o.Keys != nil {
		events = replay.OpenedEvents(o.Deps.Events, o.Keys)
	}
	rb, err := replay.NewMessageRebuilder(o.Deps.Messages, events, o.Deps.Tenants, o.Deps.Logger)
	if err != nil {
		return BenchResult{}, err
	}
	appender, ok := o.Deps.Events.(EventAppender)
	if !ok {
		return BenchResult{}, errors.New("projections: bench: the event reader cannot append")
	}
	have, err := o.Deps.Events.Count(ctx, replay.MessageFilter(o.Tenant))
	if err != nil {
		return BenchResult{}, err
	}
	if missing := o.Events - int(have); missing > 0 {
		fmt.Fprintf(o.Out, "appending %d group-message events over %d topics to the event store\n", missing, o.Topics)
		var seal domain.Sealer
		if o.Keys != nil {
			seal = o.Keys
		}
		if err := seedEvents(ctx, appender, o.Tenant, missing, o.Topics, seal); err != nil {
			return BenchResult{}, err
		}
	}
	if o.Postgres != nil {
		if _, err := o.Postgres.Exec(ctx, "VACUUM ANALYZE events"); err != nil {
			return BenchResult{}, fmt.Errorf("projections: bench: vacuum analyze events: %w", err)
		}
	}
	fmt.Fprintf(o.Out, "rebuilding %s of tenant %s\n", projections.ProjectionMessagesMySQL, o.Tenant)
	start, cpu0 := time.Now(), processCPU()
	res, err := rb.Rebuild(ctx, replay.RebuildOptions{Tenant: o.Tenant, Progress: o.Progress, BatchSize: o.BatchSize, Workers: o.Workers})
	if err != nil {
		return BenchResult{}, err
	}
	d := time.Since(start)
	out := BenchResult{Events: int(res.Events), Duration: d, PerSecond: float64(res.Events) / d.Seconds(), CPU: processCPU() - cpu0}
	fmt.Fprintf(o.Out, "rebuild from the event store into MySQL: %s\n", out)
	return out, nil
}

// EventImporter loads events with COPY (commands/eventstore.Store.Import); seeding uses it when
// the store has it.
type EventImporter interface {
	Import(ctx context.Context, events []domain.Envelope) (int64, error)
}

// seedEvents appends n group-message events of a fresh history (seqs from 1 per topic): with
// COPY in transactions of 20,000 events when s can import, else 1000 at a time with AppendBatch.
func seedEvents(ctx context.Context, s EventAppender, tenant domain.TenantID, n, topics int, seal domain.Sealer) error {
	size := 1000
	imp, fast := s.(EventImporter)
	if fast {
		size = 20_000
	}
	batch := make([]domain.Envelope, 0, size)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if fast {
			_, err := imp.Import(ctx, batch)
			batch = batch[:0]
			return err
		}
		res, err := s.AppendBatch(ctx, batch)
		if err != nil {
			return err
		}
		for i, r := range res {
			if r.Status != eventstore.Appended {
				return fmt.Errorf("append %s/%d: %s (seed a fresh tenant)", batch[i].StreamID, batch[i].StreamVersion, r.Status)
			}
		}
		batch = batch[:0]
		return nil
	}
	err := benchEvents(ctx, tenant, n, topics, seal, func(e domain.Envelope) error {
		batch = append(batch, e)
		if len(batch) == cap(batch) {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("projections: bench: seed event store: %w", err)
	}
	return nil
}
