package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/IBM/sarama"
	_ "github.com/go-sql-driver/mysql" // MySQL driver for the readiness ping
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/commands"
	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/internal/config"
	"github.com/imledger/imledger/internal/kafkabroker"
	"github.com/imledger/imledger/internal/telemetry"
	"github.com/imledger/imledger/transport/httpserver"
	"github.com/imledger/imledger/transport/kafka"
	"github.com/imledger/imledger/transport/rest"
)

// node is one running imledger process: its connections, background workers and HTTP server.
// startNode builds it; shutdown takes it apart in the reverse order.
type node struct {
	cfg config.Config
	log *slog.Logger
	reg *prometheus.Registry

	broker *kafkabroker.Broker // nil when brokers are configured
	pool   *pgxpool.Pool
	store  *eventstore.Store
	rdb    *redis.Client
	mysql  *sql.DB     // readiness ping only; nil when MySQL is disabled
	kping  *kgo.Client // readiness ping of Kafka
	send   *commands.SendMessageHandler

	producer  sarama.SyncProducer
	relay     *relay.Relay
	stopRelay context.CancelFunc
	relayDone chan struct{} // closed when the relay's Run returned

	ops  *httpserver.Ops
	srv  *http.Server
	ln   net.Listener
	errc chan error // fatal errors of background workers and the HTTP server
}

// startNode starts every component in dependency order and the HTTP listener last. On failure
// it closes what it had opened.
func startNode(ctx context.Context, cfg config.Config, log *slog.Logger) (*node, error) {
	n := newNode(cfg, log)
	err := n.startCore(ctx)
	if err == nil {
		err = n.startRelay(ctx)
	}
	if err == nil {
		err = n.startHTTP()
	}
	if err != nil {
		n.closeResources()
		return nil, err
	}
	return n, nil
}

func newNode(cfg config.Config, log *slog.Logger) *node {
	return &node{cfg: cfg, log: log, reg: telemetry.NewRegistry(buildVersion()), errc: make(chan error, 4)}
}

// startCore connects everything the write path needs: the Kafka broker (embedded when none is
// configured) and its topics, the migrated event store, Redis, the send handler and the MySQL
// and Kafka readiness clients.
func (n *node) startCore(ctx context.Context) (err error) {
	if err := n.startKafkaBroker(); err != nil {
		return err
	}
	if err := migratePostgres(ctx, n.cfg.Postgres, n.log); err != nil {
		return err
	}
	if n.pool, err = openPool(ctx, n.cfg.Postgres); err != nil {
		return err
	}
	esCfg := n.cfg.EventStore
	esCfg.Logger = n.log.With("component", "eventstore")
	if n.store, err = eventstore.New(n.pool, esCfg); err != nil {
		return err
	}
	if err := n.openRedis(ctx); err != nil {
		return err
	}
	if n.send, err = commands.NewSendMessageHandler(commands.SendMessageDeps{
		Store: n.store, Redis: n.rdb, Logger: n.log.With("component", "send"),
	}, n.cfg.Send); err != nil {
		return err
	}
	if n.cfg.MySQLEnabled() {
		if n.mysql, err = sql.Open("mysql", n.cfg.MySQL.ServerDSN); err != nil {
			return errors.New("mysql.server_dsn: not a valid MySQL DSN")
		}
		n.mysql.SetMaxOpenConns(2)
	}
	if err := kafka.EnsureTopics(ctx, n.cfg.Kafka.Config); err != nil {
		return err
	}
	if n.kping, err = kgo.NewClient(kgo.SeedBrokers(n.cfg.Kafka.Brokers...)); err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	return nil
}

// startRelay starts the outbox relay in the background with the kafka section's settings. It
// runs under its own context so that shutdown can stop it after HTTP has drained.
func (n *node) startRelay(ctx context.Context) error {
	p, err := kafka.NewSyncProducer(n.cfg.Kafka.Config)
	if err != nil {
		return err
	}
	n.producer = p
	rcfg := n.cfg.Relay
	rcfg.Kafka = n.cfg.Kafka.Config
	if n.relay, err = relay.New(n.store, p, n.pool, rcfg, n.log.With("component", "relay"), n.reg); err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.stopRelay, n.relayDone = cancel, make(chan struct{})
	go func() {
		defer close(n.relayDone)
		if err := n.relay.Run(rctx); err != nil {
			n.errc <- fmt.Errorf("relay: %w", err)
		}
	}()
	return nil
}

// startKafkaBroker starts the embedded broker when no brokers are configured and points the
// Kafka configuration at it.
func (n *node) startKafkaBroker() error {
	if !n.cfg.Kafka.UseEmbedded() {
		return nil
	}
	b, err := kafkabroker.Start(n.cfg.Kafka.Embedded, n.log)
	if err != nil {
		return err
	}
	n.broker = b
	n.cfg.Kafka.Brokers = b.Addrs()
	n.log.Warn("no Kafka brokers configured: started the embedded broker, for trying imledger only",
		"addrs", b.Addrs())
	return nil
}

func (n *node) openRedis(ctx context.Context) error {
	n.rdb = redis.NewClient(&redis.Options{Addr: n.cfg.Redis.Addr, Password: n.cfg.Redis.Password, DB: n.cfg.Redis.DB})
	if err := n.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis ping %s: %w", n.cfg.Redis.Addr, err)
	}
	return nil
}

// checks are the dependencies /readyz pings.
func (n *node) checks() []httpserver.Check {
	cs := []httpserver.Check{
		{Name: "postgres", Ping: n.pool.Ping},
		{Name: "redis", Ping: func(ctx context.Context) error { return n.rdb.Ping(ctx).Err() }},
		{Name: "kafka", Ping: n.kping.Ping},
	}
	if n.mysql != nil {
		cs = append(cs, httpserver.Check{Name: "mysql", Ping: n.mysql.PingContext})
	}
	return cs
}

// startHTTP binds the listener and serves the ops endpoints and the API in the background.
func (n *node) startHTTP() error {
	ops, err := httpserver.NewOps(httpserver.Config{
		Checks: n.checks(), Gatherer: n.reg, Logger: n.log.With("component", "readyz"),
	})
	if err != nil {
		return err
	}
	n.ops = ops
	mux := http.NewServeMux()
	ops.Register(mux)
	if _, err := rest.New(mux, rest.Config{
		Version: buildVersion(), MaxBodyBytes: n.cfg.HTTP.MaxBodyBytes,
		MaxContentBytes: n.cfg.Send.MaxContentBytes, Logger: n.log.With("component", "rest"),
	}, rest.Handlers{Send: n.send}); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", n.cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("http listen on %s: %w", n.cfg.HTTP.Addr, err)
	}
	n.ln = ln
	n.srv = &http.Server{
		Handler:           telemetry.HTTPMetrics(n.reg)(mux),
		ReadHeaderTimeout: n.cfg.HTTP.ReadHeaderTimeout,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := n.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.errc <- fmt.Errorf("http server: %w", err)
		}
	}()
	n.log.Info("serving HTTP", "addr", ln.Addr().String())
	return nil
}

// addr is the HTTP listener's address.
func (n *node) addr() string { return n.ln.Addr().String() }

// wait blocks until ctx ends (a signal) or a component fails.
func (n *node) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-n.errc:
		return err
	}
}

// shutdown stops the node within cfg.ShutdownTimeout: readiness off, HTTP stops accepting and
// drains in-flight requests, the send handler finishes what is queued, the relay finishes its
// batch (publish and checkpoint), then the producer, the pools and the embedded broker close.
// Past the deadline, remaining HTTP connections are cut and the relay is no longer waited for;
// its unsaved batch is published again by the next active relay.
func (n *node) shutdown() error {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownTimeout)
	defer cancel()
	start := time.Now()
	n.log.Info("shutting down", "deadline", n.cfg.ShutdownTimeout)
	var errs []error
	if n.ops != nil {
		n.ops.Drain()
	}
	if n.srv != nil {
		if err := n.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
			_ = n.srv.Close()
		}
	}
	if n.send != nil {
		_ = n.send.Close()
	}
	if err := n.waitRelay(ctx); err != nil {
		errs = append(errs, err)
	}
	n.closeResources()
	n.log.Info("shut down", "took", time.Since(start).Round(time.Millisecond))
	return errors.Join(errs...)
}

// waitRelay cancels the relay and waits for it to finish its batch, at most until ctx ends.
func (n *node) waitRelay(ctx context.Context) error {
	if n.stopRelay == nil {
		return nil
	}
	n.stopRelay()
	n.stopRelay = nil // closeResources must not wait again
	select {
	case <-n.relayDone:
		return nil
	case <-ctx.Done():
		return errors.New("relay did not stop before the shutdown deadline")
	}
}

// closeResources stops what is still running (when start failed half-way), then closes the
// producer, clients and pools, and the embedded broker last.
func (n *node) closeResources() {
	if n.ln != nil && n.srv == nil {
		_ = n.ln.Close()
	}
	if n.send != nil {
		_ = n.send.Close()
	}
	if n.stopRelay != nil {
		n.stopRelay()
		<-n.relayDone
	}
	if n.producer != nil {
		_ = n.producer.Close()
	}
	if n.kping != nil {
		n.kping.Close()
	}
	if n.mysql != nil {
		_ = n.mysql.Close()
	}
	if n.rdb != nil {
		_ = n.rdb.Close()
	}
	if n.pool != nil {
		n.pool.Close()
	}
	if n.broker != nil {
		n.broker.Close()
	}
}
