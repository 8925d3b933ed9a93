package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/readmodels/tenantdb"
)

// toolNode loads the configuration and the logger for a one-shot command and returns a node with
// nothing opened yet: the command opens what it needs and closes it with closeResources. A tool
// never creates or migrates the event store: it fails, naming the database, unless the database
// exists with this build's schema (imledger migrate or serve make it so).
func toolNode(cmd *cobra.Command) (*node, error) {
	cfg, err := loadConfig(cmd)
	if err != nil {
		return nil, err
	}
	log, err := newLogger(cmd.ErrOrStderr(), cfg)
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
