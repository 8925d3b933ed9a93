package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"

	_ "github.com/go-sql-driver/mysql" // MySQL driver for the readiness ping
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/kafkabroker"
	"github.com/imledger/imledger/transport/httpserver"
)

// startCore connects what every command needs: the Kafka broker (embedded when none is
// configured) and its topics, the migrated event store, Redis, and the MySQL and Kafka readiness
// clients.
func (n *node) startCore(ctx context.Context) (err error) {
	if err := n.startKafkaBroker(); err != nil {
		return err
	}
	if err := n.openPostgres(ctx); err != nil {
		return err
	}
	if err := n.openRedis(ctx); err != nil {
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

// openPostgres opens the pool and the store. Before, with the node's schema mode, it creates and
// migrates the event store database (serve, the benchmarks) or checks that it exists with this
// build's schema (the tools, which create nothing).
func (n *node) openPostgres(ctx context.Context) (err error) {
	switch n.schema {
	case checkSchema:
		err = checkEventStore(ctx, n.cfg.Postgres)
	case migrateQuietly:
		err = migratePostgres(ctx, n.cfg.Postgres, slog.New(slog.DiscardHandler))
	default:
		err = migratePostgres(ctx, n.cfg.Postgres, n.log)
	}
	if err != nil {
		return err
	}
	if n.pool, err = openPool(ctx, n.cfg.Postgres, n.bulkReads); err != nil {
		return err
	}
	esCfg := n.cfg.EventStore
	esCfg.Logger = n.log.With("component", "eventstore")
	if n.store, err = eventstore.New(n.pool, esCfg); err != nil {
		return err
	}
	return n.openKeyring(ctx)
}

// newSendHandler builds the SendMessage handler with policy (nil allows every send), files (who
// may reference which file in head.files) and listener (what hears every message at its commit;
// nil: nothing is delivered), which marks the seqs it gives up as final holes, and starts its
// heartbeat and the hole marker.
func (n *node) newSendHandler(ctx context.Context, policy message.SendPolicy, files message.FileAccess,
	listener message.CommitListener) (*message.SendMessageHandler, error) {
	var store message.MessageStore = n.store
	if n.wrapSendStore != nil {
		store = n.wrapSendStore(store)
	}
	holes := newHoleMarker(n.store, n.log.With("component", "send"))
	var router message.Router
	if n.fanout != nil && listener != nil { // the fanout reads where messages go on the allocate round trip
		router = n.fanout
	}
	h, err := message.NewSendMessageHandler(message.SendMessageDeps{
		Store: store, Redis: n.rdb, Policy: policy, Files: files, Listener: listener, Router: router, Holes: holes, Sealer: n.sealer(),
		Logger: n.log.With("component", "send"), Registerer: n.reg,
	}, n.cfg.SendConfig())
	if err != nil {
		return nil, err
	}
	// Stopped after the handler closed, so other nodes wait for this node's last sends, and the
	// holes of its last batches are marked.
	n.aux = append(n.aux, n.spawn(ctx, "send heartbeat", h.Run), n.spawn(ctx, "seq-skip markers", holes.Run))
	return h, nil
}

// startRelay starts the outbox relay in the background with the kafka section's settings (the
// relay opens its own transactional producer each term), and opens the node's plain producer for
// the cache invalidations. The relay runs under its own context so that shutdown can stop it
// after HTTP has drained.
func (n *node) startRelay(ctx context.Context) error {
	p, err := kafka.NewSyncProducer(n.cfg.Kafka.Config)
	if err != nil {
		return err
	}
	n.producer = p
	rcfg := n.cfg.Relay
	rcfg.Kafka = n.cfg.Kafka.Config
	if n.relay, err = relay.New(n.store, n.pool, rcfg, n.log.With("component", "relay"), n.reg); err != nil {
		return err
	}
	n.relayW = n.spawn(ctx, "relay", n.relay.Run)
	return nil
}

// startKafkaBroker starts the embedded broker when no brokers are configured and points the
// Kafka configuration at it.
func (n *node) startKafkaBroker() error {
	if !n.cfg.Kafka.UseEmbedded() {
		return nil
	}
	bcfg := n.cfg.Kafka.EmbeddedBroker(n.cfg.NodeID)
	b, err := kafkabroker.Start(bcfg, n.log)
	if err != nil {
		return err
	}
	n.broker = b
	n.cfg.Kafka.Brokers = b.Addrs()
	if n.cfg.Kafka.Partitions == 0 {
		// One process's broker: the topics the node creates get the broker's partition count,
		// not a cluster's. Every partition costs each consumer group a partition consumer, its
		// goroutines and buffers, and a place in every fetch: at 64, an idle node held 768
		// partition consumers and 5,200 goroutines.
		n.cfg.Kafka.Partitions = int32(cmp.Or(bcfg.Partitions, kafkabroker.DefaultPartitions))
	}
	dir := bcfg.DataDir
	if dir == "" {
		dir = kafkabroker.InMemory
	}
	n.log.Warn("no Kafka brokers configured: started the embedded broker, for trying imledger only",
		"addrs", b.Addrs(), "data_dir", dir)
	return nil
}

func (n *node) openRedis(ctx context.Context) error {
	// RESP2: the node uses nothing of RESP3, under which go-redis looks for push notifications
	// before every reply (4% of the send path's CPU).
	n.rdb = redis.NewClient(&redis.Options{Addr: n.cfg.Redis.Addr, Password: n.cfg.Redis.Password, DB: n.cfg.Redis.DB,
		Protocol: 2})
	if err := n.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis ping %s: %w", n.cfg.Redis.Addr, err)
	}
	return nil
}

// checks are the dependencies /readyz pings.
func (n *node) checks() []httpserver.Check {
	rdb := n.rdb
	cs := []httpserver.Check{
		{Name: "postgres", Ping: n.pool.Ping},
		{Name: "redis", Ping: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }},
		{Name: "kafka", Ping: n.kping.Ping},
	}
	if n.mysql != nil {
		cs = append(cs, httpserver.Check{Name: "mysql", Ping: n.mysql.PingContext})
	}
	return cs
}
