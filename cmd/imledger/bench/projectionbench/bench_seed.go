package projectionbench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/replay"
)

// SeedMessages appends group-message events to tenant's history in the event store until it
// holds n message events (the events BenchRebuild rebuilds from: messages over topics group
// conversations, seqs from 1 per topic), reporting progress to out (nil: none). It returns how
// many it appended; a history that already holds n is left alone. Use a tenant of its own: the
// seeded streams must be new.
func SeedMessages(ctx context.Context, events replay.EventReader, appender EventAppender, tenant domain.TenantID, n, topics int, out io.Writer) (int, error) {
	if topics <= 0 {
		topics = 100
	}
	have, err := events.Count(ctx, replay.MessageFilter(tenant))
	if err != nil {
		return 0, fmt.Errorf("projections: seed: %w", err)
	}
	missing := n - int(have)
	if missing <= 0 {
		return 0, nil
	}
	if have > 0 {
		return 0, fmt.Errorf("projections: seed: tenant %s already has %d message events; seed a fresh tenant or ask for at most that many", tenant, have)
	}
	if out != nil {
		fmt.Fprintf(out, "appending %d group-message events over %d topics to the event store\n", missing, topics)
	}
	start := time.Now()
	if err := seedEvents(ctx, appender, tenant, missing, topics, nil); err != nil {
		return 0, err
	}
	if out != nil {
		fmt.Fprintf(out, "appended %d events in %s\n", missing, time.Since(start).Round(time.Millisecond))
	}
	return missing, nil
}
