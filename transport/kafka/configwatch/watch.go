// Package configwatch follows im.config.event on every node: each tenant lifecycle or settings
// event makes the node read that tenant from the registry again, so a change made on one node
// applies on every node about as fast as the relay publishes it.
package configwatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
)

// Reloader reads a tenant from the registry again (*tenant.Cache).
type Reloader interface {
	Reload(ctx context.Context, t domain.TenantID) error
}

// Watcher consumes im.config.event from its end on every partition with no consumer group: every
// node reads every record. It is best effort; the cache's periodic refresh covers what it misses
// (records published while the node was down, a broker failure).
type Watcher struct {
	cfg      tkafka.Config
	reloader Reloader
	log      *slog.Logger

	consumer sarama.Consumer
	parts    []sarama.PartitionConsumer
	wg       sync.WaitGroup
}

// New returns a Watcher over the topic im.config.event of cfg; Start connects it.
func New(cfg tkafka.Config, r Reloader, logger *slog.Logger) (*Watcher, error) {
	if r == nil {
		return nil, errors.New("configwatch: a Reloader is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{cfg: cfg, reloader: r, log: logger}, nil
}

// Start connects and positions a consumer at the current end of every partition, so every record
// published after Start returns is seen; load the cache after Start to leave no gap. It fails when
// the brokers or the topic are not reachable.
func (w *Watcher) Start() error {
	sc, err := tkafka.NewSaramaConfig(w.cfg)
	if err != nil {
		return err
	}
	sc.Consumer.Return.Errors = false
	c, err := sarama.NewConsumer(w.cfg.Brokers, sc)
	if err != nil {
		return fmt.Errorf("configwatch: connect: %w", err)
	}
	topic := w.cfg.Topic(tkafka.TopicConfigEvent)
	parts, err := c.Partitions(topic)
	if err != nil {
		_ = c.Close()
		return fmt.Errorf("configwatch: partitions of %s: %w", topic, err)
	}
	w.consumer = c
	for _, p := range parts {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetNewest)
		if err != nil {
			w.close()
			return fmt.Errorf("configwatch: consume %s/%d: %w", topic, p, err)
		}
		w.parts = append(w.parts, pc)
	}
	return nil
}

// Run reloads the tenant of every config event until ctx ends, then closes the consumer. It
// returns nil.
func (w *Watcher) Run(ctx context.Context) error {
	for _, pc := range w.parts {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.follow(ctx, pc)
		}()
	}
	<-ctx.Done()
	w.close()
	w.wg.Wait()
	return nil
}

func (w *Watcher) follow(ctx context.Context, pc sarama.PartitionConsumer) {
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-pc.Messages():
			if !ok {
				return
			}
			var env struct {
				TenantID  string `json:"tenant_id"`
				EventType string `json:"event_type"`
			}
			if err := json.Unmarshal(m.Value, &env); err != nil {
				continue
			}
			info, known := domain.LookupEventType(domain.EventType(env.EventType))
			t, err := domain.NewTenantID(env.TenantID)
			if !known || info.Category != domain.CategoryConfig || err != nil {
				continue
			}
			if err := w.reloader.Reload(ctx, t); err != nil && ctx.Err() == nil {
				w.log.WarnContext(ctx, "tenant not reloaded after a config event; the next refresh picks it up",
					"tenant_id", t.String(), "err", err)
			}
		}
	}
}

func (w *Watcher) close() {
	for _, pc := range w.parts {
		pc.AsyncClose()
	}
	if w.consumer != nil {
		_ = w.consumer.Close()
	}
}
