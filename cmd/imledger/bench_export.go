package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/cmd/imledger/bench/projectionbench"
	"github.com/imledger/imledger/cmd/imledger/bench/wsbench"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/replay/export"
	"github.com/imledger/imledger/replay/republish"
)

// benchHistory is what the export and republish benchmarks read: a tenant with events
// group-message events over topics conversations, seeded when missing.
type benchHistory struct {
	tenant string
	events int
	topics int
}

func (h *benchHistory) register(cmd *cobra.Command, tenant string) {
	f := cmd.Flags()
	f.StringVar(&h.tenant, "tenant", tenant, "tenant whose history is read; seeded with group messages when it has none")
	f.IntVar(&h.events, "events", 1_000_000, "group-message events of the history")
	f.IntVar(&h.topics, "topics", 100, "group conversations they are spread over")
}

// open parses the flags, opens the event store and seeds the history (not timed), then has
// PostgreSQL analyze it, as autovacuum would have before any real export.
func (h *benchHistory) open(cmd *cobra.Command) (*node, domain.TenantID, error) {
	t, err := domain.NewTenantID(h.tenant)
	if err != nil {
		return nil, t, fmt.Errorf("--tenant: %w", err)
	}
	n, err := toolNode(cmd)
	if err != nil {
		return nil, t, err
	}
	n.schema = migrateQuietly // a scratch database
	ctx := cmd.Context()
	n.bulkReads = true
	if err := n.openPostgres(ctx); err != nil {
		n.closeResources()
		return nil, t, err
	}
	seeded, err := projectionbench.SeedMessages(ctx, n.store, n.store, t, h.events, h.topics, cmd.OutOrStdout())
	if err != nil {
		n.closeResources()
		return nil, t, err
	}
	if seeded > 0 {
		if _, err := n.pool.Exec(ctx, "VACUUM ANALYZE events"); err != nil {
			n.closeResources()
			return nil, t, fmt.Errorf("vacuum analyze events: %w", err)
		}
	}
	return n, t, nil
}

// measured runs fn after returning the heap to the OS and resetting the process's peak RSS
// (Linux: /proc/self/clear_refs), and returns the peak RSS fn reached (0 where /proc is missing).
func measured(fn func() error) (peak int64, err error) {
	runtime.GC()
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	if err := fn(); err != nil {
		return 0, err
	}
	s, serr := wsbench.SampleProcess(os.Getpid())
	if serr != nil {
		return 0, nil
	}
	return s.HWM, nil
}

func newBenchExportCmd() *cobra.Command {
	var (
		h          benchHistory
		formats    []string
		outDir     string
		cpuProfile string
	)
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Measure export of a seeded history to JSON Lines and Parquet: events/s and peak RSS",
		Long: "bench export seeds --tenant with --events group-message events in the event store when it\n" +
			"has none (with COPY; not timed), then exports them once per --formats into a directory\n" +
			"(--out, default a temporary one, removed afterwards) and prints events/s and the peak RSS of\n" +
			"this process during each export.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, t, err := h.open(cmd)
			if err != nil {
				return err
			}
			defer n.closeResources()
			out := cmd.OutOrStdout()
			base := outDir
			if base == "" {
				if base, err = os.MkdirTemp("", "imledger-bench-export-"); err != nil {
					return err
				}
				defer os.RemoveAll(base)
			}
			stop, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer stop()
			for _, f := range formats {
				dir := filepath.Join(base, f) + "/"
				_ = os.RemoveAll(dir)
				var res export.Result
				peak, err := measured(func() error {
					var err error
					res, err = export.Run(cmd.Context(), n.store, export.Config{Format: export.Format(f), Out: dir, Tenant: t,
						Logger: n.log})
					return err
				})
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "export %s: %d events in %s: %.0f events/s, peak RSS %d MiB, %d files\n", f, res.Events,
					res.Duration.Round(time.Millisecond), res.PerSecond(), peak>>20, len(res.Files))
			}
			fmt.Fprintf(out, "load average: %s\n", wsbench.LoadAverage())
			return nil
		},
	}
	h.register(cmd, "benchexport")
	cmd.Flags().StringSliceVar(&formats, "formats", []string{string(export.FormatJSONL), string(export.FormatParquet)}, "formats to measure")
	cmd.Flags().StringVar(&outDir, "out", "", "directory the exports go to (default: a temporary one, removed afterwards)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the exports to this file")
	return cmd
}

// startCPUProfile writes a CPU profile to path until stop is called; "" profiles nothing.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

func newBenchRepublishCmd() *cobra.Command {
	var (
		h          benchHistory
		cpuProfile string
	)
	cmd := &cobra.Command{
		Use:   "republish",
		Short: "Measure republish of a seeded history into Kafka: events/s",
		Long: "bench republish seeds --tenant as bench export does, then republishes its history to a topic\n" +
			"\"bench.im.replay.<tenant>.<time>\" of its own and prints events/s. Without kafka.brokers it\n" +
			"starts an embedded broker in this process, its log in a temporary directory removed afterwards\n" +
			"(or in kafka.embedded.data_dir when that is set).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, t, err := h.open(cmd)
			if err != nil {
				return err
			}
			if n.cfg.Kafka.UseEmbedded() {
				remove, err := scratchBroker(&n.cfg)
				if err != nil {
					n.closeResources()
					return err
				}
				defer remove() // after closeResources closed the broker
			}
			defer n.closeResources()
			ctx := cmd.Context()
			if err := n.startKafkaBroker(); err != nil {
				return err
			}
			kcfg := n.cfg.Kafka.Config
			topic := kcfg.Topic("bench." + republish.DefaultTopic(t) + "." + time.Now().UTC().Format("20060102150405"))
			if err := kafka.EnsureTopic(ctx, kcfg, topic); err != nil {
				return err
			}
			p, err := newRepublishProducer(kcfg)
			if err != nil {
				return err
			}
			defer func() { _ = p.Close() }()
			stop, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			res, err := republish.RunAsync(ctx, n.store, p, republish.Config{Topic: topic, LiveTopics: kcfg.LiveTopics(),
				Tenant: t, Logger: n.log})
			stop()
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "republish to %s: %d events in %s: %.0f events/s\nload average: %s\n", topic, res.Events,
				res.Duration.Round(time.Millisecond), res.PerSecond(), wsbench.LoadAverage())
			return nil
		},
	}
	h.register(cmd, "benchexport")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the republish to this file")
	return cmd
}
