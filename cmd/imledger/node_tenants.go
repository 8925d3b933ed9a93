package main

import (
	"context"
	"fmt"
	"time"

	"github.com/imledger/imledger/commands/account"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/transport/access"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/kafka/configwatch"
)

// startTenants builds the tenant registry (provisioning the demo tenant), the node's tenant cache
// and account guard, loaded after the im.config.event watcher took its position so no change
// falls between the two, the account governance and the gate REST and WebSocket check.
func (n *node) startTenants(ctx context.Context) (err error) {
	n.notifier = access.NewNotifier(nodeBroadcast{n}, n.log.With("component", "access")).WithChannel(nodeChannel{n})
	if err := n.openRegistry(n.notifier); err != nil {
		return err
	}
	if t := n.cfg.DemoTenant(); !t.IsZero() {
		if _, err := n.registry.Provision(ctx, t, nil, tenant.Meta{}); err != nil {
			return fmt.Errorf("provision the demo tenant: %w", err)
		}
		n.log.Info("demo tenant provisioned", "tenant_id", t.String())
	}
	if n.tenants, err = tenant.NewCache(n.registry, n.cfg.Tenants, n.log.With("component", "tenants")); err != nil {
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
	if n.governance, err = account.NewGovernance(account.GovernanceDeps{Pool: n.pool, Store: n.store, Accounts: n.accounts,
		Guard: n.guard, Notifier: erasingNotifier{Notifier: n.notifier, n: n}, Keys: n.keyDestroyer(), Logger: n.log.With("component", "governance")}); err != nil {
		return err
	}
	sessions, err := account.NewSessions(account.SessionDeps{Store: n.store, Guard: n.guard, Notifier: n.notifier})
	if err != nil {
		return err
	}
	if n.self, err = account.NewSelfService(n.accounts, n.governance, sessions); err != nil {
		return err
	}
	n.gate, err = access.NewGate(n.tenants, n.guard, n.cfg.Send.MaxContentBytes)
	return err
}

// openRegistry opens the tenant registry over the event store, provisioning tenants' MySQL
// databases through the router when MySQL is configured.
func (n *node) openRegistry(notifier tenant.Notifier) (err error) {
	deps := tenant.Deps{Pool: n.pool, Store: n.store, Notifier: notifier, Logger: n.log.With("component", "registry")}
	if n.router != nil {
		deps.Databases = n.router
	}
	n.registry, err = tenant.New(deps)
	return err
}

// nodeBroadcast broadcasts account messages through the node's fanout. The registry and the
// governance are built before the fanout (startTenants runs before startRealtime); a change
// before that has no session to end, and other nodes learn it at their next refresh.
type nodeBroadcast struct{ n *node }

// Broadcast implements access.Broadcaster.
func (b nodeBroadcast) Broadcast(ctx context.Context, m *fanout.Message) error {
	if b.n.fanout == nil {
		return nil
	}
	return b.n.fanout.Broadcast(ctx, m)
}
