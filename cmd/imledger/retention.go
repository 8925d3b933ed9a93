package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/commands/retention"
	"github.com/imledger/imledger/transport/access"
)

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
