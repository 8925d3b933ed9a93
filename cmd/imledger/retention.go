package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/commands/retention"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/msgstore"
	"github.com/imledger/imledger/transport/access"
)

// msgstoreExpiry is the MySQL message read model as the retention job drives it.
type msgstoreExpiry struct{ msgs *msgstore.Store }

var _ retention.ReadModel = msgstoreExpiry{}

// ExpireBefore implements retention.ReadModel.
func (m msgstoreExpiry) ExpireBefore(ctx context.Context, t domain.TenantID, from, until time.Time) (int64, error) {
	e, err := m.msgs.ExpireBefore(ctx, t, from, until)
	return e.Messages + e.Deletions, err
}

// hotExpiry is the Redis hot message model as the retention job drives it; it holds messages
// younger than its TTL only, so from does not narrow it.
type hotExpiry struct{ hot *hot.Store }

var _ retention.ReadModel = hotExpiry{}

// ExpireBefore implements retention.ReadModel.
func (h hotExpiry) ExpireBefore(ctx context.Context, t domain.TenantID, _, until time.Time) (int64, error) {
	return h.hot.ExpireBefore(ctx, t, until)
}

// retentionJob builds the retention job over the node's event store, registry and read models
// (none when MySQL is off) and the keyring, whose month keys before a horizon it destroys.
func (n *node) retentionJob() (*retention.Job, error) {
	models := map[string]retention.ReadModel{}
	if n.msgs != nil {
		models["mysql"] = msgstoreExpiry{n.msgs}
	}
	if n.hot != nil {
		models["redis"] = hotExpiry{n.hot}
	}
	deps := retention.Deps{Tenants: n.registry, Partitions: n.store, ReadModels: models,
		Logger: n.log.With("component", "retention")}
	if n.keys != nil {
		deps.Keys = n.keys
	}
	return retention.New(n.cfg.Retention, deps)
}

// startRetention runs the retention job every retention.interval, unless retention.run is false.
func (n *node) startRetention(ctx context.Context) error {
	if !n.cfg.Retention.Run {
		return nil
	}
	job, err := n.retentionJob()
	if err != nil {
		return err
	}
	n.aux = append(n.aux, n.spawn(ctx, "retention", job.Serve))
	return nil
}

// horizons is where the projections read tenants' retention horizons: the node's tenant cache
// when it runs one, else the registry; nil when neither is open.
func (n *node) horizons() projections.Horizons {
	switch {
	case n.tenants != nil:
		return n.tenants
	case n.registry != nil:
		return n.registry
	}
	return nil
}

func newRetentionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "retention",
		Short: "Apply tenants' message retention and drop expired month partitions of the event store",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "run",
		Short: "Run the retention job once (as serve does every retention.interval) and print what it did",
		Long: "For each tenant with retention_months, removes the message history before its horizon from\n" +
			"the MySQL and Redis read models and records the horizon (tenant.retention_applied.v1); makes\n" +
			"the event store's month partitions ahead; drops each month partition every tenant in it has\n" +
			"passed and every relay has published. Safe to run at any time, also next to serve.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := toolNode(cmd)
			if err != nil {
				return err
			}
			defer n.closeResources()
			if err := n.openReadTools(cmd.Context()); err != nil {
				return err
			}
			// Running nodes hear of the new horizons at once, as of any tenant change.
			if err := n.openRegistry(access.NewNotifier(redisBroadcast(n.rdb, n.cfg.FanoutConfig().KeyPrefix), n.log)); err != nil {
				return err
			}
			job, err := n.retentionJob()
			if err != nil {
				return err
			}
			rep, err := job.Run(cmd.Context())
			printRetention(cmd.OutOrStdout(), rep)
			return err
		},
	})
	return cmd
}

// printRetention writes what a run did.
func printRetention(out io.Writer, rep retention.Report) {
	for _, t := range rep.Tenants {
		from := "the beginning"
		if !t.From.IsZero() {
			from = t.From.Format(time.RFC3339)
		}
		fmt.Fprintf(out, "tenant %s: history from %s to %s removed %v\n", t.Tenant, from, t.Horizon.Format(time.RFC3339), t.Removed)
	}
	for _, p := range rep.Dropped {
		fmt.Fprintf(out, "dropped %s\n", p)
	}
	for _, k := range rep.Kept {
		fmt.Fprintf(out, "kept: %s\n", k)
	}
	fmt.Fprintf(out, "retention: %d tenants, %d partitions made ahead, %d dropped in %s\n",
		len(rep.Tenants), rep.Created, len(rep.Dropped), rep.Duration.Round(time.Millisecond))
}
