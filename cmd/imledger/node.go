package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/cmd/imledger/config"
	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/policy"
	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/commands/shred"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/internal/kafkabroker"
	"github.com/imledger/imledger/internal/telemetry"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/msgstore"
	"github.com/imledger/imledger/readmodels/query"
	"github.com/imledger/imledger/readmodels/sessions"
	"github.com/imledger/imledger/readmodels/tenantdb"
	"github.com/imledger/imledger/transport/access"
	"github.com/imledger/imledger/transport/auth"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/httpserver"
	"github.com/imledger/imledger/transport/presence"
	"github.com/imledger/imledger/transport/userchan"
	"github.com/imledger/imledger/transport/ws"
)

// node is one running imledger process: its connections, handlers, background workers and HTTP
// server. startNode builds it; shutdown takes it apart in the reverse order.
type node struct {
	cfg    config.Config
	log    *slog.Logger
	reg    *prometheus.Registry
	panics *telemetry.Panics // imledger_panics_total, shared by the WebSocket gateway and the REST API

	// Connections.
	broker *kafkabroker.Broker // nil when brokers are configured
	pool   *pgxpool.Pool
	store  *eventstore.Store
	rdb    *redis.Client
	mysql  *sql.DB     // readiness ping only; nil when MySQL is disabled
	kping  *kgo.Client // readiness ping of Kafka
	// schema says whether openPostgres creates and migrates the event store or only checks it.
	schema schemaMode
	// bulkReads gives the pool's connections a large socket read buffer, for the commands
	// that stream the whole log (export, republish).
	bulkReads bool

	// Write side.
	signer   *auth.Signer
	loader   *group.Loader  // the send policy's cache of folded states
	policy   *policy.Policy // nil: every send is allowed (bench write)
	groups   *group.Handlers
	send     *message.SendMessageHandler
	ops      *message.MessageOpsHandler
	accounts *account.Service
	// keys seals and opens personal content (DESIGN §7a); keepers wrap its data keys.
	keys    *shred.Keyring
	keepers *shred.URLKeepers

	// Tenants and account governance.
	registry   *tenant.Registry
	tenants    *tenant.Cache
	guard      *account.Guard
	governance *account.Governance
	self       *account.SelfService // the account self-service: login sessions, password changes
	notifier   *access.Notifier
	gate       *access.Gate

	// Read side; nil when MySQL is disabled.
	router *tenantdb.Router
	msgs   *msgstore.Store
	hot    *hot.Store
	biz    *business.Store
	sess   *sessions.Store
	reader *query.Reader

	// Realtime.
	presence *presence.Store
	fanout   *fanout.Fanout
	hub      *ws.Hub // this node's WebSocket sessions by topic
	gateway  *ws.Gateway
	channel  *userchan.Channel // the users' channel logs

	// Short-lived state: rate limits, verification codes, action tokens.
	state shortState
	// Offline push and files (node_push.go).
	pf pushFiles

	producer  sarama.SyncProducer
	relay     *relay.Relay
	projector *projections.Projector
	relayW    *worker // the relay's loop
	projW     *worker // the projector's loop
	aux       []*worker

	health *httpserver.Ops
	srv    *http.Server
	ln     net.Listener
	errc   chan error // fatal errors of background workers and the HTTP server

	// wrapSendStore, when set before start, wraps the event store the send handler appends
	// through (tests delay or fail appends with it).
	wrapSendStore func(message.MessageStore) message.MessageStore
}

// startNode starts every component in dependency order and the HTTP listener last. On failure
// it closes what it had opened.
func startNode(ctx context.Context, cfg config.Config, log *slog.Logger) (*node, error) {
	n := newNode(cfg, log)
	if err := n.start(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// start starts the components of a node made by newNode; on failure it closes what it had
// opened. Each step builds its components over what the steps before it built, handed to them
// as values: nothing is looked up through the node later. So the realtime parts (fanout, users'
// channels, push) run before the handlers that deliver through them and the notifier that tells
// of account changes through them, and the gateway and the REST API come after the handlers they
// call. The one cycle, between the tenant cache and the registry that tells its changes over the
// fanout, is broken in startTenants.
func (n *node) start(ctx context.Context) error {
	err := runSteps(ctx, n.startCore, n.startPolicy, n.startReadSide, n.startTenants, n.startShortState, n.startRelay,
		n.startProjector, n.startRealtime, n.startPushFiles, n.startCommands, n.startAccounts, n.startGateway,
		n.startAdmin, n.startRetention, n.startHTTP)
	if err != nil {
		n.closeResources()
	}
	return err
}

// runSteps runs steps in order until one fails.
func runSteps(ctx context.Context, steps ...func(context.Context) error) error {
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return nil
}

func newNode(cfg config.Config, log *slog.Logger) *node {
	reg := telemetry.NewRegistry(buildVersion())
	// A fresh registry holds no other imledger_panics_total, so this cannot fail; a nil counter
	// would still log every panic.
	panics, _ := telemetry.NewPanics(reg)
	return &node{cfg: cfg, log: log, reg: reg, panics: panics, errc: make(chan error, 8), schema: migrateAndLog}
}

// schemaMode is what a process does with the event store schema when it opens PostgreSQL.
type schemaMode int

const (
	// migrateAndLog creates the database when missing and applies pending migrations, and logs
	// it: serve.
	migrateAndLog schemaMode = iota
	// checkSchema creates and changes nothing: the database must exist and hold this build's
	// schema, or the command fails naming the database (the one-shot tools).
	checkSchema
	// migrateQuietly migrates like serve without logging it: the benchmarks' scratch databases.
	migrateQuietly
)

// worker is a background loop of the node, run under its own context so shutdown stops it at its
// turn, not when the process context ends.
type worker struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
}

// spawn runs fn in the background. An error it returns while it was not being stopped is fatal
// to the node.
func (n *node) spawn(ctx context.Context, name string, fn func(context.Context) error) *worker {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &worker{name: name, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		if err := fn(wctx); err != nil && wctx.Err() == nil {
			select {
			case n.errc <- fmt.Errorf("%s: %w", name, err):
			default:
			}
		}
	}()
	return w
}

// stop cancels w and waits for it until ctx ends. A nil worker is stopped.
func (w *worker) stop(ctx context.Context) error {
	if w == nil {
		return nil
	}
	w.cancel()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s did not stop before the shutdown deadline", w.name)
	}
}

// stopAll stops workers concurrently and waits for all of them until ctx ends.
func stopAll(ctx context.Context, ws ...*worker) error {
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.stop(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// addr is the HTTP listener's address.
func (n *node) addr() string { return n.ln.Addr().String() }

// chatURL is where the demo chat page is served.
func (n *node) chatURL() string {
	host, port, err := net.SplitHostPort(n.addr())
	if err != nil {
		return "http://" + n.addr() + "/"
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// announce prints where the node serves to out: the chat page and the demo tenant.
func (n *node) announce(out io.Writer) {
	if t := n.cfg.DemoTenant(); !t.IsZero() && n.router != nil {
		fmt.Fprintf(out, "imledger: chat page at %s (tenant %s)\n", n.chatURL(), t)
		return
	}
	fmt.Fprintf(out, "imledger: serving on %s\n", n.chatURL())
}

// wait blocks until ctx ends (a signal) or a component fails.
func (n *node) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-n.errc:
		return err
	}
}

// shutdown stops the node within cfg.ShutdownTimeout: readiness off; the WebSocket gateway
// closes its sessions (clients reconnect elsewhere and catch up by seq); HTTP stops accepting
// and drains in-flight requests; the send handler commits what is queued; fanout and the helper
// loops stop; the projector and the relay finish their batch; then the producer, clients, pools
// and the embedded broker close. Past the deadline, remaining connections are cut and workers are
// no longer waited for: an unsaved relay batch is published again by the next active relay, and
// unacknowledged Kafka records are consumed again.
func (n *node) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	start := time.Now()
	n.log.Info("shutting down", "deadline", n.cfg.ShutdownTimeout)
	var errs []error
	if n.health != nil {
		n.health.Drain()
	}
	if n.gateway != nil {
		if err := n.gateway.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("websocket shutdown: %w", err))
		}
	}
	if n.srv != nil {
		if err := n.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
			_ = n.srv.Close()
		}
	}
	if n.state.limiter != nil {
		n.state.limiter.Close()
	}
	if n.send != nil {
		_ = n.send.Close()
	}
	if n.fanout != nil {
		_ = n.fanout.Close()
	}
	errs = append(errs, stopAll(ctx, n.aux...), stopAll(ctx, n.projW, n.relayW))
	n.aux, n.projW, n.relayW = nil, nil, nil // closeResources must not wait again
	n.closeResources()
	n.log.Info("shut down", "took", time.Since(start).Round(time.Millisecond))
	return errors.Join(errs...)
}

// closeResources stops what is still running (when start failed half-way), then closes the
// producer, clients and pools, and the embedded broker last.
func (n *node) closeResources() {
	if n.ln != nil && n.srv == nil {
		_ = n.ln.Close()
	}
	if n.state.limiter != nil {
		n.state.limiter.Close()
	}
	if n.send != nil {
		_ = n.send.Close()
	}
	if n.fanout != nil {
		_ = n.fanout.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	_ = stopAll(ctx, append(n.aux, n.projW, n.relayW)...)
	cancel()
	if n.producer != nil {
		_ = n.producer.Close()
	}
	if n.kping != nil {
		n.kping.Close()
	}
	if n.mysql != nil {
		_ = n.mysql.Close()
	}
	if n.router != nil {
		_ = n.router.Close()
	}
	if n.rdb != nil {
		_ = n.rdb.Close()
	}
	if n.pool != nil {
		n.pool.Close()
	}
	if n.keepers != nil {
		_ = n.keepers.Close()
	}
	if n.broker != nil {
		n.broker.Close()
	}
}
