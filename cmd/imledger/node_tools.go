package main

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/readmodels/tenantdb"
	"github.com/imledger/imledger/transport/access"
	"github.com/imledger/imledger/transport/fanout"
)

// toolNode loads the configuration and the logger for a one-shot command and returns a node with
// nothing opened yet: the command opens what it needs and closes it with closeResources. A tool
// never creates or migrates the event store: it fails, naming the database, unless the database
// exists with this build's schema (imledger migrate or serve make it so).
func toolNode(cmd *cobra.Command) (*node, error) {
	cfg, log, err := loadConfigAndLogger(cmd)
	if err != nil {
		return nil, err
	}
	n := newNode(cfg, log)
	n.schema = checkSchema
	return n, nil
}

// openRouter opens the tenant database router; MySQL must be configured.
func (n *node) openRouter() (err error) {
	if !n.cfg.MySQLEnabled() {
		return fmt.Errorf("mysql.server_dsn is empty: tenants have no read-model databases")
	}
	if n.router, err = tenantdb.NewRouter(n.cfg.MySQL); err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	return nil
}

// openReadTools opens what the read-model tools need: the event store, Redis and the read
// models over MySQL.
func (n *node) openReadTools(ctx context.Context) error {
	if !n.cfg.MySQLEnabled() {
		return fmt.Errorf("mysql.server_dsn is empty: there are no read models")
	}
	if err := n.openPostgres(ctx); err != nil {
		return err
	}
	if err := n.openRedis(ctx); err != nil {
		return err
	}
	return n.openReadModels()
}

// openTenantTools opens what the tenant commands need: the event store, the registry (with the
// MySQL router when MySQL is configured, to provision databases) and the accounts, with a
// notifier that tells running nodes over Redis when Redis answers.
func openTenantTools(cmd *cobra.Command, withRouter bool) (*node, error) {
	n, err := toolNode(cmd)
	if err != nil {
		return nil, err
	}
	ctx := cmd.Context()
	if withRouter {
		if err := n.openRouter(); err != nil {
			n.closeResources()
			return nil, err
		}
	}
	if err := n.openPostgres(ctx); err != nil {
		n.closeResources()
		return nil, err
	}
	var notifier tenant.Notifier
	if err := n.openRedis(ctx); err != nil {
		n.log.Warn("redis not reachable: running nodes learn of the change through im.config.event or at their next refresh", "err", err)
		_ = n.rdb.Close()
		n.rdb = nil
	} else {
		notifier = access.NewNotifier(redisBroadcast(n.rdb, n.cfg.FanoutConfig().KeyPrefix), n.log)
	}
	if err := n.openRegistry(notifier); err != nil {
		n.closeResources()
		return nil, err
	}
	if err := n.newAccounts(); err != nil {
		n.closeResources()
		return nil, err
	}
	return n, nil
}

// redisBroadcast publishes account messages on the deployment's broadcast channel, as a node's
// fanout does, for a process that runs no fanout.
func redisBroadcast(rdb redis.UniversalClient, prefix string) access.BroadcastFunc {
	return func(ctx context.Context, m *fanout.Message) error {
		return fanout.PublishBroadcast(ctx, rdb, prefix, m)
	}
}
