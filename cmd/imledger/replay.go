package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/filedb"
	"github.com/imledger/imledger/readmodels/login"
	"github.com/imledger/imledger/readmodels/pushdb"
	"github.com/imledger/imledger/readmodels/tokendb"
	"github.com/imledger/imledger/replay"
)

// replayable lists the projections replay rebuilds.
var replayable = []string{projections.ProjectionMessagesMySQL, projections.ProjectionMessagesHot, projections.ProjectionBusinessMySQL,
	projections.ProjectionSessionsMySQL, projections.ProjectionFileRefsMySQL, projections.ProjectionPushSettings, projections.ProjectionActionTokens, account.ProjectionAPIKeys,
	projections.ProjectionLoginSessions}

// errReadModelDiffers is the error of a verification that found differences.
var errReadModelDiffers = errors.New("the read model differs from a rebuild from the event store")

func newReplayCmd() *cobra.Command {
	var (
		projection, tenant string
		verify             bool
		opts               replay.RebuildOptions
	)
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Rebuild a read model from the event store, or verify it against a rebuild",
		Long: "replay rebuilds --projection (" + strings.Join(replayable, ", ") + ") from the\n" +
			"PostgreSQL event store, for --tenant or every tenant with a database, with a progress bar on\n" +
			"stderr. messages-mysql, business-mysql, sessions-mysql, files-refs, push-settings,\n" +
			"action-tokens and login-sessions are rebuilt into fresh tables that are swapped in atomically; running projectors\n" +
			"may keep running. messages-hot re-applies every message event to Redis. tenant-api-keys\n" +
			"replaces the tenant's rows of PostgreSQL tenant_api_keys in one transaction.\n\n" +
			"With --verify nothing is replaced: a MySQL read model is rebuilt into check tables and compared\n" +
			"with the live tables (messages per topic, the others per table; tenant-api-keys key by key);\n" +
			"messages-hot is rebuilt into a scratch copy under its own Redis prefix and compared key by\n" +
			"key with the live hot window, last seqs and read marks. The differences are printed, each naming its topic or\n" +
			"table, and the command fails when there are any. Events the projectors have not applied yet\n" +
			"count as differences. Without --tenant every tenant is verified and reported, a tenant whose\n" +
			"verification fails too, and the command fails if any differed or failed.\n\n" +
			"Without --tenant, finding no tenant database (a wrong mysql.database_template, nothing\n" +
			"provisioned) is an error. A second rebuild, or a second verification, of a MySQL read model\n" +
			"of a tenant is refused while another runs, in this process or another.",
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
			if !slices.Contains(replayable, projection) {
				return fmt.Errorf("--projection %q: want one of %s", projection, strings.Join(replayable, ", "))
			}
			if opts.BatchSize < 0 {
				return fmt.Errorf("--batch %d: want a positive number (0 for the default)", opts.BatchSize)
			}
			if opts.Workers < 0 {
				return fmt.Errorf("--workers %d: want a positive number (0 for the default)", opts.Workers)
			}
			return runReplay(cmd, opts, verify)
		},
	}
	f := cmd.Flags()
	f.StringVar(&projection, "projection", "", "read model: "+strings.Join(replayable, ", ")+" (required)")
	f.StringVar(&tenant, "tenant", "", "only this tenant (default: every tenant with a database)")
	f.BoolVar(&verify, "verify", false, "compare the live read model with a rebuild instead of replacing it")
	f.IntVar(&opts.BatchSize, "batch", 0, "events per write transaction (default 5000)")
	f.IntVar(&opts.Workers, "workers", 0, "concurrent writers, each owning its conversations (default 2)")
	_ = cmd.MarkFlagRequired("projection")
	return cmd
}

// runReplay opens the event store and the read models and rebuilds or verifies.
func runReplay(cmd *cobra.Command, opts replay.RebuildOptions, verify bool) error {
	n, err := toolNode(cmd)
	if err != nil {
		return err
	}
	defer n.closeResources()
	ctx := cmd.Context()
	if err := n.openReadTools(ctx); err != nil {
		return err
	}
	if !opts.Tenant.IsZero() {
		// messages-hot lives in Redis, which knows no tenants: the tenant's database says
		// whether it was provisioned, as it does for the MySQL read models.
		if _, err := n.router.DB(ctx, opts.Tenant); err != nil {
			return fmt.Errorf("--tenant: %w", err)
		}
	}
	out, progress := cmd.OutOrStdout(), cmd.ErrOrStderr()
	opts.Progress = progressBars(progress)
	rebuild, err := n.replayer(opts.Projection)
	if err != nil {
		return err
	}
	if !verify {
		res, err := rebuild.Rebuild(ctx, opts)
		if errors.Is(err, replay.ErrNoTenants) {
			return noTenants(n, "rebuilt")
		}
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
		if len(tenants) == 0 {
			return noTenants(n, "verified")
		}
	}
	return verifyTenants(ctx, rebuild, tenants, opts, out, progress)
}

// errVerifyFailed is the error of a verification that could not be carried out for a tenant.
var errVerifyFailed = errors.New("the verification failed")

// verifyTenants verifies every tenant, one after another, and goes on past a tenant that differs
// or whose verification fails (the failure is printed with the reports), so one run tells about
// every tenant, and ends with a count; it fails when any differed or failed. Only a cancelled
// ctx stops it early. With --tenant, that tenant's failure is the error as it is.
func verifyTenants(ctx context.Context, rebuild replayer, tenants []domain.TenantID, opts replay.RebuildOptions, out, progress io.Writer) error {
	var differ, failed []string
	for _, t := range tenants {
		ok, err := rebuild.Verify(ctx, replay.VerifyOptions{Tenant: t, Out: out, Progress: progressBars(progress), BatchSize: opts.BatchSize})
		if ctx.Err() != nil || (err != nil && !opts.Tenant.IsZero()) {
			return errors.Join(ctx.Err(), err)
		}
		switch {
		case err != nil:
			fmt.Fprintf(out, "tenant %s: %s not verified: %v\n", t, opts.Projection, err)
			failed = append(failed, t.String())
		case !ok:
			differ = append(differ, t.String())
		}
	}
	if opts.Tenant.IsZero() {
		fmt.Fprintf(out, "%s: %d tenants verified: %d match, %d differ, %d failed\n", opts.Projection, len(tenants),
			len(tenants)-len(differ)-len(failed), len(differ), len(failed))
	}
	var errs []error
	if len(differ) > 0 {
		errs = append(errs, fmt.Errorf("%w: tenants %s", errReadModelDiffers, strings.Join(differ, ", ")))
	}
	if len(failed) > 0 {
		errs = append(errs, fmt.Errorf("%w: tenants %s", errVerifyFailed, strings.Join(failed, ", ")))
	}
	return errors.Join(errs...)
}

// noTenants is the error of a rebuild or verification of every tenant that found no tenant
// database: it names the template, the likely mistake, so "nothing done" never reads as success.
func noTenants(n *node, done string) error {
	return fmt.Errorf("%w matching mysql.database_template %q: nothing %s (provision a tenant, or check the template)",
		replay.ErrNoTenants, n.cfg.MySQL.DatabaseTemplate, done)
}

func printRebuild(out io.Writer, projection string, res replay.RebuildResult) {
	for _, t := range res.Tenants {
		fmt.Fprintf(out, "%s: tenant %s: %d events read, %d applied in %s\n",
			projection, t.Tenant, t.Events, t.Applied, t.Duration.Round(time.Millisecond))
	}
	fmt.Fprintf(out, "%s: %d tenants, %d events in %s (%.0f events/s)\n",
		projection, len(res.Tenants), res.Events, res.Duration.Round(time.Millisecond), res.PerSecond())
}

// replayer is a rebuilder of one kind of read model, as replay drives it.
type replayer interface {
	Rebuild(ctx context.Context, o replay.RebuildOptions) (replay.RebuildResult, error)
	Verify(ctx context.Context, o replay.VerifyOptions) (ok bool, err error)
}

// replayer returns the rebuilder of projection over the node's stores.
func (n *node) replayer(projection string) (replayer, error) {
	events := replay.OpenedEvents(n.store, n.opener()) // as the live projections see them
	switch projection {
	case projections.ProjectionBusinessMySQL:
		return modelReplayer(replay.NewBusinessRebuilder(n.biz, events, n.router, n.log))
	case projections.ProjectionSessionsMySQL:
		return modelReplayer(replay.NewSessionsRebuilder(n.sess, events, n.router, n.log))
	case account.ProjectionAPIKeys:
		r, err := account.NewAPIKeyRebuilder(n.pool, n.store, n.log)
		return apiKeyReplayer{rb: r, tenants: n.router}, err
	case projections.ProjectionPushSettings:
		return modelReplayer(replay.NewPushRebuilder(pushdb.New(n.router), events, n.router, n.log))
	case projections.ProjectionFileRefsMySQL:
		return modelReplayer(replay.NewFileRebuilder(filedb.New(n.router), events, n.router, n.log))
	case projections.ProjectionActionTokens:
		return modelReplayer(replay.NewActionTokenRebuilder(tokendb.New(n.router), events, n.router, n.log))
	case projections.ProjectionLoginSessions:
		return modelReplayer(replay.NewLoginSessionRebuilder(login.New(n.router), events, n.router, n.log))
	}
	if n.registry == nil {
		if err := n.openRegistry(nil); err != nil {
			return nil, err
		}
	}
	events = replay.ExpiringEvents(events, n.horizons())
	if projection == projections.ProjectionMessagesHot {
		r, err := replay.NewHotRebuilder(n.hot, events, n.router, n.log)
		return checked[replay.HotVerifyResult]{r}, err
	}
	return modelReplayer(replay.NewMessageRebuilder(n.msgs, events, n.router, n.log))
}

// modelReplayer is the replayer of a read model of the generic replay.Rebuilder.
func modelReplayer[S comparable](r *replay.Rebuilder[S], err error) (replayer, error) {
	return checked[replay.Verification[S]]{r}, err
}

// checked adapts a rebuilder whose verification reports itself (to VerifyOptions.Out) to
// replayer.
type checked[V interface{ OK() bool }] struct {
	rb interface {
		Rebuild(ctx context.Context, o replay.RebuildOptions) (replay.RebuildResult, error)
		Verify(ctx context.Context, o replay.VerifyOptions) (V, error)
	}
}

func (c checked[V]) Rebuild(ctx context.Context, o replay.RebuildOptions) (replay.RebuildResult, error) {
	return c.rb.Rebuild(ctx, o)
}

func (c checked[V]) Verify(ctx context.Context, o replay.VerifyOptions) (bool, error) {
	res, err := c.rb.Verify(ctx, o)
	return res.OK(), err
}

// apiKeyReplayer replays tenant_api_keys, the PostgreSQL read model of the API key events, for
// the tenants replay finds as it does for the MySQL read models.
type apiKeyReplayer struct {
	rb      *account.APIKeyRebuilder
	tenants replay.TenantDatabases
}

func (r apiKeyReplayer) Rebuild(ctx context.Context, o replay.RebuildOptions) (replay.RebuildResult, error) {
	tenants := []domain.TenantID{o.Tenant}
	if o.Tenant.IsZero() {
		var err error
		if tenants, err = r.tenants.Tenants(ctx); err != nil {
			return replay.RebuildResult{}, err
		}
		if len(tenants) == 0 {
			return replay.RebuildResult{}, fmt.Errorf("rebuild %s: %w", account.ProjectionAPIKeys, replay.ErrNoTenants)
		}
	}
	start := time.Now()
	var res replay.RebuildResult
	for _, t := range tenants {
		ts := time.Now()
		n, err := r.rb.Rebuild(ctx, t)
		if err != nil {
			return res, err
		}
		res.Tenants = append(res.Tenants, replay.TenantRebuild{Tenant: t, Events: n, Applied: n, Duration: time.Since(ts)})
		res.Events += n
	}
	res.Duration = time.Since(start)
	return res, nil
}

func (r apiKeyReplayer) Verify(ctx context.Context, o replay.VerifyOptions) (bool, error) {
	res, err := r.rb.Verify(ctx, o.Tenant)
	if err == nil && o.Out != nil {
		res.Report(o.Out)
	}
	return res.OK(), err
}
