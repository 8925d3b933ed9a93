package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/cmd/imledger/bench/searchbench"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/business"
)

func newBenchSearchCmd() *cobra.Command {
	var (
		o      searchbench.Options
		tenant string
	)
	cmd := &cobra.Command{
		Use:   "search",
		Short: "Seed a tenant with users and time user search by prefix",
		Long: "bench search provisions --tenant's read-model database (use a tenant of its own), gives it --users\n" +
			"users (the ones it lacks: user.registered.v1 and user.profile_updated.v1 applied through the business\n" +
			"projection's apply path, --batch users a transaction, --workers at once; one in twenty opts out of\n" +
			"search; not timed as a query), then makes --queries searches by nickname and as many by login\n" +
			"name, --concurrency at once, each the first page (--limit) of a one- to three-character prefix of a\n" +
			"random user's nickname or login, searched by another random user, and prints p50, p99 and max.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := domain.NewTenantID(tenant)
			if err != nil {
				return fmt.Errorf("--tenant: %w", err)
			}
			n, err := toolNode(cmd)
			if err != nil {
				return err
			}
			defer n.closeResources()
			ctx := cmd.Context()
			if err := n.openRouter(); err != nil {
				return err
			}
			if err := n.router.Provision(ctx, t); err != nil {
				return err
			}
			if o.Store, err = business.NewStore(n.router, nil, n.cfg.Business); err != nil {
				return err
			}
			o.Tenant, o.Out = t, cmd.OutOrStdout()
			start := time.Now()
			seeded, err := searchbench.Seed(ctx, o)
			if err != nil {
				return err
			}
			took := time.Since(start)
			fmt.Fprintf(o.Out, "seeded %d users in %s (%.0f users/s); the tenant has %d\n", seeded, took.Round(time.Millisecond),
				float64(seeded)/max(took.Seconds(), 1e-9), o.Users)
			_, err = searchbench.Run(ctx, o)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&tenant, "tenant", "benchsearch", "tenant whose read model is seeded and searched")
	f.IntVar(&o.Users, "users", 100_000, "users the tenant has after seeding")
	f.IntVar(&o.Batch, "batch", 1000, "users one seeding transaction writes")
	f.IntVar(&o.Workers, "workers", 4, "seeding transactions at once")
	f.IntVar(&o.Queries, "queries", 2000, "searches of each kind (nickname, login)")
	f.IntVar(&o.Concurrency, "concurrency", 4, "searches at once")
	f.IntVar(&o.Limit, "limit", business.DefaultSearchLimit, "page size of each search")
	return cmd
}
