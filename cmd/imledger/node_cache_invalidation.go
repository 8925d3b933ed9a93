package main

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/projections"
)

// kafkaCacheInvalidations publishes the cache keys each business projection batch made stale on
// im.cache.invalidate (projections.Invalidations), keyed by tenant, for the systems that cache
// business reads: {"tenant_id":"demo","keys":["im:demo:group:{7}:members",...]}. imledger nodes
// do not consume it: the Redis entries are shared and already deleted by the projection, and the
// send policy's in-process caches hear of every change from the commands, before it is projected.
//
// Publish waits for the broker's ack, as the relay does. The projector consumes from the same
// Kafka, so this costs one produce round trip per batch and never waits on a broker the projector
// could do without; a failure is logged and the entries expire with their TTL.
type kafkaCacheInvalidations struct {
	producer sarama.SyncProducer
	topic    string
	log      *slog.Logger
}

var _ projections.Invalidations = kafkaCacheInvalidations{}

// cacheInvalidation is the value of an im.cache.invalidate record.
type cacheInvalidation struct {
	Tenant string   `json:"tenant_id"`
	Keys   []string `json:"keys"`
}

// Publish implements projections.Invalidations.
func (k kafkaCacheInvalidations) Publish(ctx context.Context, tenant domain.TenantID, keys []string) {
	body, err := json.Marshal(cacheInvalidation{Tenant: tenant.String(), Keys: keys})
	if err == nil {
		_, _, err = k.producer.SendMessage(&sarama.ProducerMessage{Topic: k.topic,
			Key: sarama.StringEncoder(tenant.String()), Value: sarama.ByteEncoder(body)})
	}
	if err != nil {
		k.log.WarnContext(ctx, "cache invalidation not published; the entries expire with their TTL",
			"tenant_id", tenant.String(), "keys", len(keys), "err", err)
	}
}
