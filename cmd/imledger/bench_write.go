package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/cmd/imledger/bench/writebench"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/ratelimit"
)

// benchRelayName is the relay that bench write runs: its own checkpoint and lock, so it neither
// waits for nor disturbs the relay of a serve process on the same database.
const benchRelayName = "bench"

// benchWriteFlags are the flags of bench write.
type benchWriteFlags struct {
	tenant     string
	opts       writebench.BenchWriteOptions
	noRelay    bool
	drain      time.Duration
	policy     bool
	limits     bool
	abSlice    time.Duration
	cpuProfile string
}

func (fl *benchWriteFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&fl.tenant, "tenant", "bench", "tenant that receives the messages")
	f.StringVar(&fl.cpuProfile, "cpuprofile", "", "write a CPU profile of the sends (and the relay's drain) to this file")
	f.IntVar(&fl.opts.Senders, "senders", 50, "concurrent senders (users 1..N, one send in flight each)")
	f.IntVar(&fl.opts.Topics, "topics", 100, "group topics written to, grp<first-group>...")
	f.Int64Var(&fl.opts.FirstGroupID, "first-group", 1, "group id of the first topic")
	f.IntVar(&fl.opts.Count, "count", 0, "stop after this many sends in total (0: run for --duration)")
	f.DurationVar(&fl.opts.Duration, "duration", 10*time.Second, "run this long when --count is 0")
	f.IntVar(&fl.opts.ContentBytes, "content-bytes", 100, "size of each text message")
	f.BoolVar(&fl.noRelay, "no-relay", false, "do not run and measure the relay")
	f.BoolVar(&fl.policy, "policy", false, "create the groups, join the senders and check every send against the send policy")
	f.BoolVar(&fl.limits, "rate-limits", false, "check every send against the send rate limits (rate_limit.*), as serve does")
	f.DurationVar(&fl.abSlice, "ab-slice", 0, "with --rate-limits and --duration: after a slice of warm-up, alternate slices this long with and without the limits (ABBA) and report both")
	f.DurationVar(&fl.drain, "drain-timeout", time.Minute, "how long to wait for the relay to catch up after the writes")
}

func newBenchWriteCmd() *cobra.Command {
	var fl benchWriteFlags
	cmd := &cobra.Command{
		Use:   "write",
		Short: "Send group messages through the SendMessage handler and report sends/s and latency",
		Long: "bench write sends text messages from --senders concurrent users over --topics group topics\n" +
			"through the same SendMessage handler serve uses (Redis seqs, group commit to PostgreSQL) and\n" +
			"prints sends/s, p50, p99 and max latency and the error count. Unless --no-relay, it also runs\n" +
			"a relay named \"bench\" that publishes to topics prefixed \"bench.\" and reports the events/s it\n" +
			"published until it caught up with the writes. The first run's relay also publishes the events\n" +
			"already in the database. The send policy is not consulted unless --policy: then the benchmark\n" +
			"first creates its groups and joins every sender to each through the group commands (reporting\n" +
			"joins/s), and every send is checked against membership and mutes like a real one. With\n" +
			"--rate-limits every send is also counted against the per-user and per-topic send limits in\n" +
			"Redis (rate_limit.send_per_user, rate_limit.send_per_topic) as serve does; compare runs with\n" +
			"and without it for the limiter's cost, or add --ab-slice to compare both in one run: after a\n" +
			"slice of warm-up, slices of that length go to sends with (A) and without (B) the limits in the\n" +
			"order ABBA ABBA... (--duration whole rounds of four), and the report gives each one's sends/s\n" +
			"and their ratio (the machine's drift falls on both alike).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return fl.run(cmd) },
	}
	fl.register(cmd)
	return cmd
}

// run starts the parts of a node the benchmark uses and runs it.
func (fl *benchWriteFlags) run(cmd *cobra.Command) error {
	t, err := domain.NewTenantID(fl.tenant)
	if err != nil {
		return fmt.Errorf("--tenant: %w", err)
	}
	fl.opts.Tenant = t
	cfg, log, err := loadConfigAndLogger(cmd)
	if err != nil {
		return err
	}
	cfg.Relay.Name = benchRelayName
	cfg.Kafka.TopicPrefix += "bench."
	n := newNode(cfg, log)
	n.schema = migrateQuietly // a scratch database
	defer func() { _ = n.shutdown() }()
	if err := fl.start(cmd, n); err != nil {
		return err
	}
	var sender writebench.MessageSender = n.send
	if fl.limits {
		l, err := n.newLimiter()
		if err != nil {
			return err
		}
		defer l.Close()
		sender = ratelimit.LimitSends(n.send, l)
		if fl.abSlice > 0 {
			fl.opts.Alternate, fl.opts.Slice = n.send, fl.abSlice
		}
	} else if fl.abSlice > 0 {
		return fmt.Errorf("--ab-slice compares sends with and without --rate-limits: give both")
	}
	stop, err := startCPUProfile(fl.cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	return runBenchWrite(cmd.Context(), cmd.OutOrStdout(), n, sender, fl.opts, fl.drain)
}

// start starts n's core, its send handler (with --policy the send policy and the group
// commands, and the groups joined) and, unless --no-relay, its relay.
func (fl *benchWriteFlags) start(cmd *cobra.Command, n *node) error {
	if err := n.startCore(cmd.Context()); err != nil {
		return err
	}
	var err error
	if fl.policy {
		if err := runSteps(cmd.Context(), n.startPolicy, n.startCommands); err != nil {
			return err
		}
		if !cmd.Flags().Changed("first-group") {
			fl.opts.FirstGroupID = time.Now().UnixMilli() // fresh groups for every run
		}
		if err := prepareBenchGroups(cmd.Context(), cmd.OutOrStdout(), n, fl.opts); err != nil {
			return err
		}
	} else if n.send, err = n.newSendHandler(cmd.Context(), nil, message.NoFiles{}, nil); err != nil { // the groups need not exist
		return err
	}
	if !fl.noRelay {
		if err := n.startRelay(cmd.Context()); err != nil {
			return err
		}
	}
	return nil
}

// runBenchWrite runs the write benchmark on n and, when n runs a relay, waits for it to publish
// everything written and reports its rate.
func runBenchWrite(ctx context.Context, out io.Writer, n *node, sender writebench.MessageSender, opts writebench.BenchWriteOptions, drain time.Duration) error {
	start := time.Now()
	res, err := writebench.BenchWrite(ctx, sender, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "write: sends=%d errors=%d elapsed=%s sends/s=%.0f p50=%s p99=%s max=%s\n",
		res.Sends, res.Errors, res.Elapsed.Round(time.Millisecond), res.SendsPerSec, res.P50, res.P99, res.Max)
	if res.FirstError != nil {
		fmt.Fprintf(out, "write: first error: %v\n", res.FirstError)
	}
	if opts.Alternate != nil {
		fmt.Fprintf(out, "write: %d slices of %s after one of warm-up, ABBA: with the limits sends/s=%.0f, without sends/s=%.0f, with/without=%.3f\n",
			res.SlicesPerRun, opts.Slice, res.SliceRates[0], res.SliceRates[1], res.SliceRates[0]/res.SliceRates[1])
	}
	if n.relay == nil {
		return nil
	}
	last, err := n.store.LastCursor(ctx)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(drain)
	for n.relay.Stats().Cursor.Before(last) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			st := n.relay.Stats()
			fmt.Fprintf(out, "relay: did not catch up within %s: events=%d at %+v of %+v\n", drain, st.Events, st.Cursor, last)
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	st, took := n.relay.Stats(), time.Since(start)
	fmt.Fprintf(out, "relay: events=%d batches=%d elapsed=%s events/s=%.0f caught_up_after_writes=%s\n",
		st.Events, st.Batches, took.Round(time.Millisecond), float64(st.Events)/took.Seconds(),
		(took - res.Elapsed).Round(time.Millisecond))
	return nil
}

// prepareBenchGroups creates the benchmark's groups (owned by user 1) and joins users
// 2..Senders to every one of them through the node's group commands, Senders joins at a time,
// and reports the joins that took effect per second.
func prepareBenchGroups(ctx context.Context, out io.Writer, n *node, opts writebench.BenchWriteOptions) error {
	if err := createBenchGroups(ctx, n.groups, opts.Tenant, opts.FirstGroupID, opts.Topics,
		func(int) domain.UserID { return 1 }); err != nil {
		return err
	}
	perGroup := max(opts.Senders-1, 0)
	start := time.Now()
	joins, err := joinBenchGroups(ctx, n.groups, opts.Tenant, opts.Topics*perGroup, opts.Senders,
		func(j int) (domain.UserID, domain.GroupID) {
			return domain.UserID(2 + j%perGroup), domain.GroupID(opts.FirstGroupID + int64(j/perGroup))
		})
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	fmt.Fprintf(out, "joins: %d into %d groups in %s (%.0f joins/s, %d concurrent)\n",
		joins, opts.Topics, elapsed.Round(time.Millisecond), float64(joins)/elapsed.Seconds(), opts.Senders)
	return nil
}
