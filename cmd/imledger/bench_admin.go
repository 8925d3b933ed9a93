package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/cmd/imledger/config"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/admintrust"
	"github.com/imledger/imledger/transport/kafka/adminclient"
)

// benchAdminFlags are the flags of bench admin.
type benchAdminFlags struct {
	o         adminclient.BenchOptions
	inProcess bool
	pprof     string
	keys      adminKeyFlags
}

func (fl *benchAdminFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&fl.o.Tenant, "tenant", "bench", "tenant of the users (provisioned when missing)")
	f.IntVar(&fl.o.Pairs, "pairs", 0, "closed loop: this many ban/unban pairs")
	f.IntVar(&fl.o.Concurrency, "concurrency", 64, "closed loop: pairs in flight at once")
	f.Float64Var(&fl.o.Rate, "rate", 0, "open loop: commands per second")
	f.DurationVar(&fl.o.Duration, "duration", 10*time.Second, "open loop: how long to send")
	f.IntVar(&fl.o.Users, "users", 1000, "distinct users the commands are about")
	f.Int64Var(&fl.o.FirstUser, "first-user", 1, "id of the first user")
	f.DurationVar(&fl.o.Timeout, "timeout", 30*time.Second, "how long a command waits for its result")
	f.BoolVar(&fl.inProcess, "in-process", false, "start a node in this process even when kafka.brokers is set")
	f.StringVar(&fl.pprof, "pprof", "", "serve this process's net/http/pprof profiles on this address")
	fl.keys.register(f, false)
}

func newBenchAdminCmd() *cobra.Command {
	var fl benchAdminFlags
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Send user.ban/user.unban commands through Kafka and report commands/s and produce->result latency",
		Long: "bench admin provisions --tenant and sends admin commands the way an admin system does\n" +
			"(transport/kafka/adminclient): with --pairs, closed-loop ban/unban pairs from --concurrency\n" +
			"workers, each waiting for both results; with --rate, open-loop commands at that rate for\n" +
			"--duration. Every result is accounted for (succeeded, rejected, failed, none in --timeout).\n" +
			"With no kafka.brokers configured, or --in-process, it starts a whole node in this process\n" +
			"(the embedded broker, the consumer and the stores it writes to); otherwise the nodes of the\n" +
			"configured deployment answer. The commands are signed, and verified, as in production: in\n" +
			"this process with a key made for the run, otherwise with admin.signing_key (--signing-key).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return fl.run(cmd) },
	}
	fl.register(cmd)
	return cmd
}

// run sets up the node that answers, in this process or the configured deployment's, and
// runs the benchmark against it.
func (fl *benchAdminFlags) run(cmd *cobra.Command) error {
	t, err := domain.NewTenantID(fl.o.Tenant)
	if err != nil {
		return fmt.Errorf("--tenant: %w", err)
	}
	if fl.o.Pairs <= 0 && fl.o.Rate <= 0 {
		return fmt.Errorf("give --pairs (closed loop) or --rate (open loop)")
	}
	n, err := toolNode(cmd)
	if err != nil {
		return err
	}
	n.schema = migrateQuietly // a scratch database
	if fl.pprof != "" {
		stop, err := servePprof(fl.pprof, n.log)
		if err != nil {
			return err
		}
		defer stop()
	}
	ctx := cmd.Context()
	var signer *admintrust.Signer
	if fl.inProcess || n.cfg.Kafka.UseEmbedded() {
		// The node in this process knows a key made for the run, so the commands are
		// signed and verified as in production.
		if signer, err = benchKey(&n.cfg); err != nil {
			return err
		}
		n.cfg.HTTP.Addr = "127.0.0.1:0"
		if n.cfg.Kafka.UseEmbedded() {
			remove, err := scratchBroker(&n.cfg)
			if err != nil {
				return err
			}
			defer remove() // after the node's shutdown closed the broker
		}
		if n, err = startNode(ctx, n.cfg, n.log); err != nil {
			return err
		}
		defer func() { _ = n.shutdown() }()
		if _, err := n.registry.Provision(ctx, t, nil, tenant.Meta{}); err != nil {
			return err
		}
	} else {
		defer n.closeResources()
		if signer, err = adminSigner(n.cfg, fl.keys); err != nil {
			return err
		}
		if err := n.openPostgres(ctx); err != nil {
			return err
		}
		if err := n.provisionBenchTenant(ctx, t); err != nil {
			return err
		}
	}
	return benchAdmin(cmd, n, t, signer, fl.o)
}

// benchAdmin registers the users the commands are about in tenant t of n and sends the
// commands, signed by signer, through n's brokers; it prints the result and fails when a command
// did not succeed.
func benchAdmin(cmd *cobra.Command, n *node, t domain.TenantID, signer *admintrust.Signer, o adminclient.BenchOptions) error {
	ctx := cmd.Context()
	if err := registerBenchUsers(ctx, n.store, t, domain.UserID(o.FirstUser), o.Users); err != nil {
		return err
	}
	c, err := adminclient.New(adminclient.Config{Kafka: n.cfg.Kafka.Config, Source: "imledger-bench", Signer: signer})
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := adminclient.Bench(ctx, c, o)
	res.Print(cmd.OutOrStdout())
	if err != nil {
		return err
	}
	if res.Succeeded != res.Sent {
		return fmt.Errorf("bench admin: %d of %d commands did not succeed", res.Sent-res.Succeeded, res.Sent)
	}
	return nil
}

// benchKey makes a producer key for one in-process benchmark run, adds it to cfg's producer keys
// and returns its signer.
func benchKey(cfg *config.Config) (*admintrust.Signer, error) {
	g, err := admintrust.GenerateProducerKey(admintrust.AlgEd25519, "bench-"+time.Now().UTC().Format("150405"),
		admintrust.PlatformScope, domain.Actor{Type: domain.ActorAdmin, ID: "bench"})
	if err != nil {
		return nil, err
	}
	cfg.Admin.ProducerKeys = append(cfg.Admin.ProducerKeys, g.Producer)
	return admintrust.ParseSigner(g.Signer)
}

// registerBenchUsers makes the users the commands are about exist in tenant, as registrations
// do (user.registered.v1 on each profile stream; the user commands refuse a user who does not
// exist), in appends of up to 500 users; users who exist already are left as they are.
func registerBenchUsers(ctx context.Context, store *eventstore.Store, t domain.TenantID, first domain.UserID, n int) error {
	actor := domain.Actor{Type: domain.ActorSystem, ID: "imledger-bench"}
	var parts []eventstore.StreamAppend
	flush := func() error {
		if len(parts) == 0 {
			return nil
		}
		_, err := store.AppendStreams(ctx, t, parts)
		parts = parts[:0]
		return err
	}
	for u := first; u < first+domain.UserID(n); u++ {
		if v, err := store.LastVersion(ctx, t, domain.ProfileStreamID(u)); err != nil {
			return err
		} else if v > 0 {
			continue
		}
		login, err := domain.NewLogin("user" + u.String())
		if err != nil {
			return err
		}
		pending, err := domain.Register(t, u, login, domain.UserProfile{}, time.Now())
		if err != nil {
			return err
		}
		envs, err := domain.NewEnvelopes(t, actor, pending)
		if err != nil {
			return err
		}
		parts = append(parts, eventstore.StreamAppend{StreamID: domain.ProfileStreamID(u), Events: envs})
		if len(parts) == 500 {
			if err := flush(); err != nil {
				return fmt.Errorf("register the bench users: %w", err)
			}
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("register the bench users: %w", err)
	}
	return nil
}
