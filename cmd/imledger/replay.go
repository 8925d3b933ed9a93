package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
)

// errReadModelDiffers is the error of a verification that found differences.
var errReadModelDiffers = errors.New("the read model differs from a rebuild from the event store")

func newReplayCmd() *cobra.Command {
	var (
		projection, tenant string
		verify             bool
		opts               projections.RebuildOptions
	)
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Rebuild a read model from the event store, or verify it against a rebuild",
		Long: "replay rebuilds --projection (" + projections.ProjectionMessagesMySQL + " or " + projections.ProjectionMessagesHot + ") from the\n" +
			"PostgreSQL event store, for --tenant or every tenant with a database, with a progress bar on\n" +
			"stderr. messages-mysql is rebuilt into fresh tables that are swapped in atomically; running\n" +
			"projectors may keep running. messages-hot re-applies every message event to Redis.\n\n" +
			"With --verify nothing is replaced: messages-mysql is rebuilt into check tables, compared\n" +
			"with the live tables topic by topic and the differences printed; the command fails when\n" +
			"there are any. Events the projectors have not applied yet count as differences.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Projection = projection
			if tenant != "" {
				t, err := domain.NewTenantID(tenant)
				if err != nil {
					return fmt.Errorf("--tenant: %w", err)
				}
				opts.Tenant = t
			}
			if projection != projections.ProjectionMessagesMySQL && projection != projections.ProjectionMessagesHot {
				return fmt.Errorf("--projection %q: want %s or %s", projection, projections.ProjectionMessagesMySQL, projections.ProjectionMessagesHot)
			}
			if verify && projection != projections.ProjectionMessagesMySQL {
				return fmt.Errorf("--verify: only %s can be verified", projections.ProjectionMessagesMySQL)
			}
			return runReplay(cmd, opts, verify)
		},
	}
	f := cmd.Flags()
	f.StringVar(&projection, "projection", "", "read model: "+projections.ProjectionMessagesMySQL+" or "+projections.ProjectionMessagesHot+" (required)")
	f.StringVar(&tenant, "tenant", "", "only this tenant (default: every tenant with a database)")
	f.BoolVar(&verify, "verify", false, "compare the live read model with a rebuild instead of replacing it")
	f.IntVar(&opts.BatchSize, "batch", 0, "events read per page and written per call (default 1000)")
	f.IntVar(&opts.Workers, "workers", 0, "concurrent writers, each owning its conversations (default 4)")
	_ = cmd.MarkFlagRequired("projection")
	return cmd
}

// runReplay opens the event store and the read models and rebuilds or verifies.
func runReplay(cmd *cobra.Command, opts projections.RebuildOptions, verify bool) error {
	n, err := toolNode(cmd)
	if err != nil {
		return err
	}
	defer n.closeResources()
	ctx := cmd.Context()
	if err := n.openReadTools(ctx); err != nil {
		return err
	}
	rb, err := projections.NewRebuilder(projections.RebuildDeps{Events: n.store, Tenants: n.router, Messages: n.msgs,
		Hot: n.hot, Logger: n.log})
	if err != nil {
		return err
	}
	out, progress := cmd.OutOrStdout(), cmd.ErrOrStderr()
	opts.Progress = progress
	if !verify {
		res, err := rb.Rebuild(ctx, opts)
		if err != nil {
			return err
		}
		printRebuild(out, opts.Projection, res)
		return nil
	}
	tenants := []domain.TenantID{opts.Tenant}
	if opts.Tenant.IsZero() {
		if tenants, err = n.router.Tenants(ctx); err != nil {
			return err
		}
	}
	var differ []string
	for _, t := range tenants {
		res, err := rb.Verify(ctx, projections.VerifyOptions{Tenant: t, Out: out, Progress: progress, BatchSize: opts.BatchSize})
		if err != nil {
			return err
		}
		if !res.OK() {
			differ = append(differ, t.String())
		}
	}
	if len(differ) > 0 {
		return fmt.Errorf("%w: tenants %s", errReadModelDiffers, strings.Join(differ, ", "))
	}
	return nil
}

func printRebuild(out io.Writer, projection string, res projections.RebuildResult) {
	for _, t := range res.Tenants {
		fmt.Fprintf(out, "%s: tenant %s: %d events read, %d applied in %s\n",
			projection, t.Tenant, t.Events, t.Applied, t.Duration.Round(time.Millisecond))
	}
	fmt.Fprintf(out, "%s: %d tenants, %d events in %s (%.0f events/s)\n",
		projection, len(res.Tenants), res.Events, res.Duration.Round(time.Millisecond), res.PerSecond())
}
