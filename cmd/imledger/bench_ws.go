package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/cmd/imledger/bench/wsbench"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/policy"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/transport/access"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/ws"
)

func newBenchWSCmd() *cobra.Command {
	var (
		o         wsbench.Options
		tenant    string
		groupSize int
		mon       benchMonitor
	)
	cmd := &cobra.Command{
		Use:   "ws",
		Short: "Load the WebSocket gateway with clients that publish to shared groups, or hold idle connections",
		Long: "bench ws connects --clients WebSocket clients, one user each, in --groups groups (client i,\n" +
			"user first-user+i, is in group first-group + i mod groups; --group-size sets groups to\n" +
			"clients/group-size), has the first --senders of them publish at --rate messages/s in total\n" +
			"(--inflight bounds each sender's unanswered pubs; --rate 0 --inflight 1 publishes each\n" +
			"message when the previous one was acked) for --duration, and prints sent, acked and\n" +
			"delivered counts, errors and the ack and send-to-delivery latencies. With --idle the\n" +
			"clients only log in, subscribe and hold their connections for --duration. It first creates\n" +
			"the groups and memberships through the group commands on the event store (existing ones\n" +
			"are kept) and provisions --tenant's read-model database.\n\n" +
			"Without --url it starts a whole node in this process on a free port and loads it (--pprof\n" +
			"serves this process's profiles). With --url (repeatable; clients are spread over them)\n" +
			"it loads running nodes that share this configuration's PostgreSQL, Redis and auth.keys;\n" +
			"--server-pid names such a node's process (e.g. an imledger serve started in the\n" +
			"background) so its memory and CPU are reported.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := domain.NewTenantID(tenant)
			if err != nil {
				return fmt.Errorf("--tenant: %w", err)
			}
			o.Tenant = t
			if groupSize > 0 {
				if o.Clients%groupSize != 0 {
					return fmt.Errorf("--group-size %d does not divide --clients %d", groupSize, o.Clients)
				}
				o.Groups = o.Clients / groupSize
			}
			for label := range mon.stores {
				if !slices.ContainsFunc(benchStores, func(s benchStore) bool { return s.label == label }) {
					return fmt.Errorf("--store-pid %s: want postgres, mariadb or redis", label)
				}
			}
			if mon.pid != 0 && len(o.URLs) == 0 {
				return errors.New("--server-pid needs --url: without it the node runs in this process")
			}
			return runBenchWS(cmd, o, &mon)
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&o.URLs, "url", nil, "gateway to load, ws://host:port"+ws.Path+" (repeatable; default: an in-process node)")
	f.StringVar(&tenant, "tenant", "demo", "tenant the clients log in to")
	f.IntVar(&o.Clients, "clients", 100, "connections, one user each")
	f.IntVar(&o.Groups, "groups", 10, "group topics")
	f.IntVar(&groupSize, "group-size", 0, "clients per group; sets --groups to clients/group-size")
	f.IntVar(&o.Senders, "senders", 0, "clients that publish, the first ones (default: every client)")
	f.Float64Var(&o.Rate, "rate", 1000, "messages per second over all senders; 0 with --inflight: as fast as answers come")
	f.IntVar(&o.InFlight, "inflight", 0, "unanswered pubs a sender may have (default: no bound)")
	f.BoolVar(&o.Channel, "channel", false, "subscribe every client to its user's channel (me) too, after its group")
	f.BoolVar(&o.Idle, "idle", false, "only hold the logged-in, subscribed connections for --duration and report the server's memory")
	f.DurationVar(&o.Duration, "duration", 10*time.Second, "how long clients publish (or hold their connections)")
	f.DurationVar(&o.Drain, "drain", 3*time.Second, "how long to wait for outstanding acks and deliveries")
	f.IntVar(&o.ContentBytes, "content-bytes", 64, "approximate size of each message's content")
	f.Int64Var(&o.FirstUser, "first-user", 1_000_000, "user id of the first client")
	f.Int64Var(&o.FirstGroup, "first-group", 1_000_000, "id of the first group")
	f.IntVar(&o.DialConcurrency, "dial-concurrency", 32, "connections set up at once")
	f.IntVar(&mon.pid, "server-pid", 0, "process id of the node behind --url, to report its RSS and CPU")
	f.StringToIntVar(&mon.stores, "store-pid", nil, "charge a store (postgres, mariadb, redis) with the process tree of this pid "+
		"rather than every process of its name, e.g. postgres=<postmaster pid> (repeatable)")
	f.DurationVar(&mon.lagWait, "lag-wait", 5*time.Minute, "how long to wait after the window for the projectors to reach lag 0")
	f.StringVar(&mon.pprof, "pprof", "", "serve net/http/pprof of this process (with --url the load client alone) on this address, e.g. 127.0.0.1:6060")
	return cmd
}

// runBenchWS prepares the groups on the target (an in-process node, or the nodes of --url that
// share this configuration) and runs the load.
func runBenchWS(cmd *cobra.Command, o wsbench.Options, mon *benchMonitor) error {
	n, err := toolNode(cmd)
	if err != nil {
		return err
	}
	n.schema = migrateQuietly // a scratch database
	ctx := cmd.Context()
	o.Logger = n.log
	if len(o.URLs) == 0 {
		n.cfg.HTTP.Addr = "127.0.0.1:0"
		// Every load connection comes from one address and each scenario is above a user's
		// everyday rate: the in-process node measures the platform without its rate limits,
		// as bench write does unless --rate-limits.
		n.cfg.RateLimit.Enabled = false
		n, err = startNode(ctx, n.cfg, n.log)
		if err != nil {
			return err
		}
		defer func() { _ = n.shutdown() }()
		o.URLs = []string{"ws://" + n.addr() + ws.Path}
		mon.pid, mon.inProcess = os.Getpid(), true
	} else {
		defer n.closeResources()
		if err := n.openBenchTarget(ctx); err != nil {
			return err
		}
	}
	if mon.pprof != "" {
		stop, err := servePprof(mon.pprof, n.log)
		if err != nil {
			return err
		}
		defer stop()
	}
	o.Tokens = n.signer
	if err := n.readyBenchWS(ctx, o); err != nil {
		return err
	}
	if mon.pid != 0 {
		o.Monitor = mon.run
	}
	cu := n.benchCatchUp(mon)
	if !o.Idle {
		o.Monitor = cu.monitor(o.Monitor)
	}
	before := n.scrapeNodes(ctx, o.URLs)
	res, err := wsbench.Run(ctx, o)
	if err != nil {
		return err
	}
	if err := res.Print(cmd.OutOrStdout()); err != nil {
		return err
	}
	if err := mon.print(cmd.OutOrStdout()); err != nil {
		return err
	}
	if !o.Idle {
		cu.finish(ctx)
		if err := cu.print(cmd.OutOrStdout(), res.Acked); err != nil {
			return err
		}
	}
	return printNodesMetrics(cmd.OutOrStdout(), o.URLs, before, n.scrapeNodes(ctx, o.URLs))
}

// readyBenchWS provisions the benchmark's tenant and creates its groups and memberships; with
// channels it waits until the read model knows the joins.
func (n *node) readyBenchWS(ctx context.Context, o wsbench.Options) error {
	if err := n.provisionBenchTenant(ctx, o.Tenant); err != nil {
		return err
	}
	start := time.Now()
	if err := n.prepareBenchGroups(ctx, o); err != nil {
		return err
	}
	if o.Channel {
		// A channel session starts from the groups the read model knows: wait for the joins.
		if err := n.waitBenchMembers(ctx, o); err != nil {
			return err
		}
	}
	n.log.Info("bench ws: groups ready", "groups", o.Groups, "clients", o.Clients, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// printNodesMetrics prints the metrics of each node of urls scraped both before and after the
// run, once per node.
func printNodesMetrics(out io.Writer, urls []string, before, after map[string]nodeMetrics) error {
	for _, u := range urls {
		if before[u] == nil || after[u] == nil {
			continue
		}
		if err := printNodeMetrics(out, u, before[u], after[u]); err != nil {
			return err
		}
		delete(after, u) // a URL given twice is reported once
	}
	return nil
}

// benchCatchUp prepares the CPU and projector-lag report of a run: the projectors are this
// process's own when the node runs here, else those of this configuration (measured from their
// committed offsets on its brokers).
func (n *node) benchCatchUp(mon *benchMonitor) *windowCatchUp {
	cu := &windowCatchUp{serverPID: mon.pid, serverLabel: "server", wait: mon.lagWait, storeRoots: mon.stores}
	switch {
	case mon.inProcess:
		cu.serverLabel = "this process (node and clients)"
		if n.projector != nil {
			cu.lag = n.projector.Lag
		}
	case n.cfg.MySQLEnabled() && n.cfg.Projections.Run:
		// The loaded node's projectors: on its brokers, or on the embedded broker it runs.
		cfg, projs := n.cfg.ProjectorConfig(), n.readProjections()
		cfg.Kafka = n.cfg.Kafka.ClientOfServe()
		cu.lag = func(ctx context.Context) ([]projections.GroupLag, error) {
			return projections.LagOf(ctx, cfg, projs...)
		}
	}
	return cu
}

// scrapeNodes reads the metrics of every node loaded, once per URL; a node whose metrics cannot
// be read is left out of the report, with a warning.
func (n *node) scrapeNodes(ctx context.Context, urls []string) map[string]nodeMetrics {
	out := map[string]nodeMetrics{}
	for _, u := range urls {
		if _, done := out[u]; done {
			continue
		}
		m, err := scrapeMetrics(ctx, u)
		if err != nil {
			n.log.Warn("bench ws: reading the node's metrics failed; its report is left out", "url", u, "err", err)
			continue
		}
		out[u] = m
	}
	return out
}

// openBenchTarget opens what preparing remote nodes needs: the event store, Redis for the
// invalidations, the tenant router when MySQL is configured, and the shared signing key.
func (n *node) openBenchTarget(ctx context.Context) (err error) {
	if len(n.cfg.Auth.Keys) == 0 {
		return errors.New("auth.keys is empty: --url needs the keys the target nodes verify tokens with")
	}
	if n.signer, err = auth.NewSigner(n.cfg.Auth.Signer()); err != nil {
		return err
	}
	if err := n.openPostgres(ctx); err != nil {
		return err
	}
	if err := n.openRedis(ctx); err != nil {
		return err
	}
	if n.cfg.MySQLEnabled() {
		return n.openRouter()
	}
	return nil
}

// prepareBenchGroups creates the groups wsbench uses and makes every client a member of its
// group: client i (user FirstUser+i) owns group FirstGroup+i when i < Groups and joins group
// FirstGroup + i mod Groups otherwise. Groups and memberships that exist already are kept. The
// commands tell every node's send policy about the changes.
func (n *node) prepareBenchGroups(ctx context.Context, o wsbench.Options) error {
	inval := redisInvalidation{rdb: n.rdb, channel: n.cfg.InvalidationChannel(), node: n.cfg.NodeID + "-bench"}
	h, err := group.New(group.Deps{Store: n.store, Invalidator: policy.Broadcaster{Remote: inval}}, n.cfg.Groups)
	if err != nil {
		return err
	}
	user := func(i int) domain.UserID { return domain.UserID(o.FirstUser + int64(i)) }
	if err := createBenchGroups(ctx, h, o.Tenant, o.FirstGroup, o.Groups, user); err != nil {
		return err
	}
	_, err = joinBenchGroups(ctx, h, o.Tenant, o.Clients-o.Groups, 32, func(j int) (domain.UserID, domain.GroupID) {
		i := o.Groups + j
		return user(i), domain.GroupID(o.FirstGroup + int64(i%o.Groups))
	})
	return err
}

// waitBenchMembers waits, up to a minute, until the business read model holds every membership of
// the bench's groups; without MySQL it returns at once.
func (n *node) waitBenchMembers(ctx context.Context, o wsbench.Options) error {
	if n.router == nil {
		return nil
	}
	db, err := n.router.DB(ctx, o.Tenant)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		var members int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM im_group_members WHERE group_id BETWEEN ? AND ? AND status = 'member'",
			o.FirstGroup, o.FirstGroup+int64(o.Groups)-1).Scan(&members)
		switch {
		case err != nil:
			return fmt.Errorf("bench ws: count the projected memberships: %w", err)
		case members >= o.Clients:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("bench ws: the read model holds %d of %d memberships after a minute", members, o.Clients)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createBenchGroups creates count groups through h, ids first, first+1, ..., group g owned by
// owner(g). Groups that exist already are kept.
func createBenchGroups(ctx context.Context, h *group.Handlers, tenant domain.TenantID, first int64, count int, owner func(g int) domain.UserID) error {
	for g := range count {
		profile, err := domain.NewGroupProfile(fmt.Sprintf("bench %d", g), "", "")
		if err != nil {
			return err
		}
		gid := domain.GroupID(first + int64(g))
		_, err = h.CreateGroup.Handle(ctx, group.CreateGroup{Actor: domain.Principal{Tenant: tenant, User: owner(g)}, Group: gid, Profile: profile})
		if err != nil && !isDenied(err, domain.ReasonGroupExists) {
			return fmt.Errorf("create bench group %d: %w", gid, err)
		}
	}
	return nil
}

// joinBenchGroups makes count joins through h, workers at a time: join j is user member(j)
// joining its group. Memberships that exist already are kept. It returns how many joins took
// effect, and the first failure.
func joinBenchGroups(ctx context.Context, h *group.Handlers, tenant domain.TenantID, count, workers int,
	member func(j int) (domain.UserID, domain.GroupID)) (joined int, err error) {
	jobs := make(chan int)
	errc := make(chan error, 1)
	var (
		wg sync.WaitGroup
		n  atomic.Int64
	)
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				uid, gid := member(j)
				_, err := h.JoinGroup.Handle(ctx, group.JoinGroup{Actor: domain.Principal{Tenant: tenant, User: uid}, Group: gid})
				switch {
				case err == nil:
					n.Add(1)
				case !isDenied(err, domain.ReasonAlreadyMember):
					select {
					case errc <- fmt.Errorf("bench user %d joins group %d: %w", uid, gid, err):
					default:
					}
				}
			}
		}()
	}
	for j := range count {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	select {
	case err = <-errc:
	default:
	}
	return int(n.Load()), err
}

// isDenied reports whether err is a refusal with reason.
func isDenied(err error, reason string) bool {
	var d *domain.DeniedError
	return errors.As(err, &d) && d.Reason == reason
}

// benchMonitor is what bench ws watches besides the clients: the node's process (and, when the
// node runs elsewhere, this load client's), sampled while it is loaded, and optionally a pprof
// endpoint of this process.
type benchMonitor struct {
	pid       int
	stores    map[string]int // --store-pid: store label → root pid
	pprof     string
	inProcess bool
	procs     []*wsbench.ProcessMonitor
	lagWait   time.Duration
}

func (m *benchMonitor) run(ctx context.Context) {
	if m.inProcess {
		m.procs = []*wsbench.ProcessMonitor{{PID: m.pid, Label: "this process (node and clients)"}}
	} else {
		m.procs = []*wsbench.ProcessMonitor{{PID: m.pid, Label: "server"}, {PID: os.Getpid(), Label: "load client"}}
	}
	var wg sync.WaitGroup
	for _, p := range m.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.Run(ctx)
		}()
	}
	wg.Wait()
}

func (m *benchMonitor) print(w io.Writer) error {
	for _, p := range m.procs {
		if err := p.Report(w); err != nil {
			return err
		}
	}
	if len(m.procs) > 0 {
		start, end := m.procs[0].Load()
		_, err := fmt.Fprintf(w, "load average %s at the start, %s at the end\n", start, end)
		return err
	}
	return nil
}

// servePprof serves net/http/pprof on addr from a mux of its own (never the node's) until stop.
func servePprof(addr string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("pprof listening", "addr", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

// provisionBenchTenant makes sure tenant is in the registry (with its MySQL database when MySQL
// is configured), so the nodes admit its clients. An in-process node already has a registry;
// against running nodes one is opened, telling them over Redis.
func (n *node) provisionBenchTenant(ctx context.Context, tenantID domain.TenantID) error {
	if n.registry == nil {
		var notifier tenant.Notifier
		if n.rdb != nil {
			notifier = access.NewNotifier(redisBroadcast(n.rdb, n.cfg.FanoutConfig().KeyPrefix), n.log)
		}
		if err := n.openRegistry(notifier); err != nil {
			return err
		}
	}
	_, err := n.registry.Provision(ctx, tenantID, nil, tenant.Meta{})
	return err
}
