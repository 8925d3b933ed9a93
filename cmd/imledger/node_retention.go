package main

import (
	"context"
	"time"

	"github.com/imledger/imledger/commands/retention"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/msgstore"
)

// msgstoreExpiry is the MySQL message read model as the retention job drives it.
type msgstoreExpiry struct{ msgs *msgstore.Store }

var _ retention.ReadModel = msgstoreExpiry{}

// ExpireBefore implements retention.ReadModel.
func (m msgstoreExpiry) ExpireBefore(ctx context.Context, t domain.TenantID, from, until time.Time) (int64, error) {
	e, err := m.msgs.ExpireBefore(ctx, t, from, until)
	return e.Messages + e.Deletions, err
}

// hotExpiry is the Redis hot message model as the retention job drives it; it holds messages
// younger than its TTL only, so from does not narrow it.
type hotExpiry struct{ hot *hot.Store }

var _ retention.ReadModel = hotExpiry{}

// ExpireBefore implements retention.ReadModel.
func (h hotExpiry) ExpireBefore(ctx context.Context, t domain.TenantID, _, until time.Time) (int64, error) {
	return h.hot.ExpireBefore(ctx, t, until)
}

// retentionJob builds the retention job over the node's event store, registry and read models
// (none when MySQL is off) and the keyring, whose month keys before a horizon it destroys.
func (n *node) retentionJob() (*retention.Job, error) {
	models := map[string]retention.ReadModel{}
	if n.msgs != nil {
		models["mysql"] = msgstoreExpiry{n.msgs}
	}
	if n.hot != nil {
		models["redis"] = hotExpiry{n.hot}
	}
	deps := retention.Deps{Tenants: n.registry, Partitions: n.store, ReadModels: models,
		Logger: n.log.With("component", "retention")}
	if n.keys != nil {
		deps.Keys = n.keys
	}
	return retention.New(n.cfg.Retention, deps)
}

// startRetention runs the retention job every retention.interval, unless retention.run is false.
func (n *node) startRetention(ctx context.Context) error {
	if !n.cfg.Retention.Run {
		return nil
	}
	job, err := n.retentionJob()
	if err != nil {
		return err
	}
	n.aux = append(n.aux, n.spawn(ctx, "retention", job.Serve))
	return nil
}

// horizons is where the projections read tenants' retention horizons: the node's tenant cache
// when it runs one, else the registry; nil when neither is open.
func (n *node) horizons() projections.Horizons {
	switch {
	case n.tenants != nil:
		return n.tenants
	case n.registry != nil:
		return n.registry
	}
	return nil
}
