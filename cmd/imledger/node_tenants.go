package main

import (
	"context"
	"fmt"
	"time"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/transport/access"
	"github.com/imledger/imledger/transport/kafka/configwatch"
)

// startTenants provisions the demo tenant and builds the node's tenant cache and account guard,
// loaded after the im.config.event watcher took its position so no change falls between the
// two, and the gate REST and WebSocket check.
//
// The cache and the node's registry would need each other: the registry tells every change it
// commits over the fanout, whose deliverer applies it to this cache, and the cache reads the
// registry. Reading needs no notifier, so the cache reads through a registry that tells no one,
// built first; the node's registry, which tells, is built once the fanout runs (startAccounts).
// The demo tenant is provisioned through the first, before anyone is online to hear of it; other
// nodes load it at their next refresh.
func (n *node) startTenants(ctx context.Context) (err error) {
	source, err := n.newRegistry(nil)
	if err != nil {
		return err
	}
	if t := n.cfg.DemoTenant(); !t.IsZero() {
		if _, err := source.Provision(ctx, t, nil, tenant.Meta{}); err != nil {
			return fmt.Errorf("provision the demo tenant: %w", err)
		}
		n.log.Info("demo tenant provisioned", "tenant_id", t.String())
	}
	if n.tenants, err = tenant.NewCache(source, n.cfg.Tenants, n.log.With("component", "tenants")); err != nil {
		return err
	}
	// A signed-out session is remembered past its token's expiry for as long as a verifier still
	// takes an expired token (auth.leeway), with room to spare.
	grace := max(5*time.Minute, 2*n.cfg.Auth.Leeway)
	if n.guard, err = account.NewGuard(n.pool, account.GuardConfig{RefreshInterval: n.cfg.Tenants.RefreshInterval, RevokedGrace: grace},
		n.log.With("component", "account_guard")); err != nil {
		return err
	}
	watch, err := configwatch.New(n.cfg.Kafka.Config, n.tenants, n.log.With("component", "config_watch"))
	if err != nil {
		return err
	}
	if err := watch.Start(); err != nil {
		return err
	}
	n.aux = append(n.aux, n.spawn(ctx, "config watch", watch.Run))
	if err := n.tenants.Load(ctx); err != nil {
		return fmt.Errorf("load the tenant registry: %w", err)
	}
	if err := n.guard.Load(ctx); err != nil {
		return fmt.Errorf("load account governance: %w", err)
	}
	n.aux = append(n.aux, n.spawn(ctx, "tenant cache", n.tenants.Run), n.spawn(ctx, "account guard", n.guard.Run))
	n.gate, err = access.NewGate(n.tenants, n.guard, n.cfg.Send.MaxContentBytes)
	return err
}

// startAccounts builds what tells every node of account and tenant changes: the notifier over the
// fanout, which logs each account change on its user's channel first, and the node's tenant
// registry that tells its changes through it; then the account governance, the login sessions and
// the account self-service.
func (n *node) startAccounts(_ context.Context) (err error) {
	n.notifier = access.NewNotifier(n.fanout, n.log.With("component", "access")).WithChannel(n.channel)
	if err := n.openRegistry(n.notifier); err != nil {
		return err
	}
	if n.governance, err = account.NewGovernance(account.GovernanceDeps{Pool: n.pool, Store: n.store, Accounts: n.accounts,
		Guard: n.guard, Notifier: erasingNotifier{Notifier: n.notifier, channel: n.channel, log: n.log}, Keys: n.keyDestroyer(),
		Logger: n.log.With("component", "governance")}); err != nil {
		return err
	}
	sessions, err := account.NewSessions(account.SessionDeps{Store: n.store, Guard: n.guard, Notifier: n.notifier})
	if err != nil {
		return err
	}
	n.self, err = account.NewSelfService(n.accounts, n.governance, sessions)
	return err
}

// openRegistry opens the node's tenant registry (n.registry) with notifier; see newRegistry.
func (n *node) openRegistry(notifier tenant.Notifier) (err error) {
	n.registry, err = n.newRegistry(notifier)
	return err
}

// newRegistry builds a tenant registry over the event store that tells notifier (nil: no one)
// of every change it commits, provisioning tenants' MySQL databases through the router when
// MySQL is configured.
func (n *node) newRegistry(notifier tenant.Notifier) (*tenant.Registry, error) {
	deps := tenant.Deps{Pool: n.pool, Store: n.store, Notifier: notifier, Logger: n.log.With("component", "registry")}
	if n.router != nil {
		deps.Databases = n.router
	}
	return tenant.New(deps)
}
