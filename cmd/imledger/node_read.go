package main

import (
	"context"
	"fmt"

	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/filedb"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/login"
	"github.com/imledger/imledger/readmodels/msgstore"
	"github.com/imledger/imledger/readmodels/pushdb"
	"github.com/imledger/imledger/readmodels/query"
	"github.com/imledger/imledger/readmodels/sessions"
	"github.com/imledger/imledger/readmodels/tenantdb"
	"github.com/imledger/imledger/readmodels/tokendb"
)

// startReadSide opens the read models: the tenant database router (provisioning the demo
// tenant), the MySQL message store, the business store with its Redis caches, the Redis hot
// messages, the sessions history and the query reader over them. With MySQL disabled there is no read side.
func (n *node) startReadSide(ctx context.Context) (err error) {
	if !n.cfg.MySQLEnabled() {
		n.log.Warn("mysql.server_dsn is empty: no read models, history or projections")
		return nil
	}
	return n.openReadModels()
}

// openReadModels builds the stores over MySQL and Redis; it opens no connection yet.
func (n *node) openReadModels() (err error) {
	if n.router, err = tenantdb.NewRouter(n.cfg.MySQL); err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	n.msgs = msgstore.NewStore(n.router)
	bcfg := n.cfg.BusinessConfig()
	bcfg.Logger = n.log.With("component", "business")
	if n.biz, err = business.NewStore(n.router, n.rdb, bcfg); err != nil {
		return fmt.Errorf("business: %w", err)
	}
	if n.hot, err = hot.NewStore(n.rdb, n.cfg.HotConfig(), n.biz); err != nil {
		return fmt.Errorf("hot: %w", err)
	}
	if n.sess, err = sessions.NewStore(n.router); err != nil {
		return err
	}
	n.reader = query.NewReader(n.msgs, n.hot, n.log.With("component", "query"))
	return nil
}

// readProjections are the projections serve runs. The business projection publishes the cache
// keys it made stale on im.cache.invalidate when the node has a Kafka producer (serve); the
// dead-letter tools apply without publishing.
func (n *node) readProjections() []projections.Projection {
	log := n.log.With("component", "projection", "projection", projections.ProjectionBusinessMySQL)
	var inv projections.Invalidations
	if n.producer != nil {
		inv = kafkaCacheInvalidations{producer: n.producer, topic: n.cfg.Kafka.Topic(kafka.TopicCacheInvalidate), log: log}
	}
	ps := []projections.Projection{
		projections.WithRetention(projections.MessagesMySQL(n.msgs, ""), n.horizons()),
		projections.WithRetention(projections.MessagesHot(n.hot, ""), n.horizons()),
		projections.BusinessMySQL(n.biz, "", inv, log),
		projections.SessionsMySQL(n.sess, ""),
		projections.FileRefsMySQL(filedb.New(n.router), ""),
		projections.PushSettings(pushdb.New(n.router), ""),
		projections.ActionTokens(tokendb.New(n.router), ""),
		projections.LoginSessions(login.New(n.router), ""),
		projections.Erasure(projections.Erasers{Messages: n.msgs, Hot: n.hot, Profiles: n.biz, Files: filedb.New(n.router)}, ""),
	}
	for i := range ps {
		ps[i] = projections.Opened(ps[i], n.opener())
	}
	return ps
}

// startProjector runs the projectors in the background, unless MySQL is off or projections.run
// is false.
func (n *node) startProjector(ctx context.Context) (err error) {
	if n.router == nil || !n.cfg.Projections.Run {
		return nil
	}
	n.projector, err = projections.NewProjector(n.cfg.ProjectorConfig(),
		projections.Deps{Postgres: n.pool, Logger: n.log, Registerer: n.reg}, n.readProjections()...)
	if err != nil {
		return err
	}
	n.projW = n.spawn(ctx, "projector", n.projector.Run)
	return nil
}
