package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/cmd/imledger/bench/projectionbench"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// Modes of bench projection.
const (
	benchModeLive    = "live"
	benchModeRebuild = "rebuild"
	benchModeBoth    = "both"
)

func newBenchProjectionCmd() *cobra.Command {
	var (
		mode, tenant   string
		events, topics int
		batch, workers int
		cpuProfile     string
	)
	cmd := &cobra.Command{
		Use:   "projection",
		Short: "Measure how fast the messages-mysql projection applies events",
		Long: "bench projection measures the messages-mysql read model of --tenant (provisioned if needed;\n" +
			"use a tenant of its own, the benchmark writes into its live tables):\n\n" +
			"  live     publishes --events group-message events to Kafka topics prefixed \"bench.\" (not\n" +
			"           timed), then times a projector in a fresh consumer group until all are in MySQL;\n" +
			"  rebuild  appends group-message events to the event store until the tenant has --events\n" +
			"           of them (not timed), then times a rebuild from the event store into MySQL.\n\n" +
			"Without Kafka brokers configured, live uses an embedded broker in this process.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := domain.NewTenantID(tenant)
			if err != nil {
				return fmt.Errorf("--tenant: %w", err)
			}
			if mode != benchModeLive && mode != benchModeRebuild && mode != benchModeBoth {
				return fmt.Errorf("--mode %q: want %s, %s or %s", mode, benchModeLive, benchModeRebuild, benchModeBoth)
			}
			n, err := toolNode(cmd)
			if err != nil {
				return err
			}
			n.schema = migrateQuietly // a scratch database
			defer n.closeResources()
			ctx := cmd.Context()
			if err := n.openBenchProjection(ctx, t, mode); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			stop, err := startCPUProfile(cpuProfile)
			if err != nil {
				return fmt.Errorf("--cpuprofile: %w", err)
			}
			defer stop()
			if mode != benchModeRebuild {
				if _, err := projectionbench.BenchLive(ctx, projectionbench.BenchLiveOptions{Config: n.cfg.ProjectorConfig(),
					Postgres: n.pool, Store: n.msgs, Tenant: t, Events: events, Topics: topics, Out: out}); err != nil {
					return err
				}
			}
			if mode != benchModeLive {
				if _, err := projectionbench.BenchRebuild(ctx, projectionbench.BenchRebuildOptions{
					Deps: projectionbench.RebuildDeps{Events: n.store, Tenants: n.router, Messages: n.msgs, Logger: n.log}, Keys: n.sealKeys(),
					Tenant: t, Events: events, Topics: topics, BatchSize: batch, Workers: workers, Out: out, Progress: progressBars(out), Postgres: n.pool}); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&mode, "mode", benchModeBoth, "live, rebuild or both")
	f.StringVar(&tenant, "tenant", "bench", "tenant whose read model is written")
	f.IntVar(&events, "events", 200_000, "group-message events")
	f.IntVar(&topics, "topics", 100, "group conversations they are spread over")
	f.IntVar(&batch, "batch", 0, "rebuild: events per write transaction (default 5000)")
	f.IntVar(&workers, "workers", 0, "rebuild: concurrent writers (default 2)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole benchmark (publishing included) to this file")
	return cmd
}

// openBenchProjection opens the event store, the tenant's provisioned message store and, for the
// live benchmark, Kafka (embedded when none is configured) under the "bench." topic prefix.
func (n *node) openBenchProjection(ctx context.Context, t domain.TenantID, mode string) error {
	if err := n.openRouter(); err != nil {
		return err
	}
	if err := n.router.Provision(ctx, t); err != nil {
		return err
	}
	n.msgs = msgstore.NewStore(n.router)
	if err := n.openPostgres(ctx); err != nil {
		return err
	}
	if mode == benchModeRebuild {
		return nil
	}
	n.cfg.Kafka.TopicPrefix += "bench."
	if err := n.startKafkaBroker(); err != nil {
		return err
	}
	return kafka.EnsureTopics(ctx, n.cfg.Kafka.Config)
}
