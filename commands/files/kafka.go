package files

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafka"
)

// KafkaQueue puts check tasks on im.file.security with a synchronous producer, keyed by tenant
// and file.
type KafkaQueue struct {
	Producer sarama.SyncProducer
	Topic    string // the full name of im.file.security
}

var _ CheckQueue = KafkaQueue{}

// EnqueueCheck implements CheckQueue.
func (q KafkaQueue) EnqueueCheck(_ context.Context, t CheckTask) error {
	b, err := MarshalTask(t)
	if err != nil {
		return err
	}
	_, _, err = q.Producer.SendMessage(&sarama.ProducerMessage{Topic: q.Topic,
		Key: sarama.StringEncoder(t.TenantID.String() + ":" + t.FileID), Value: sarama.ByteEncoder(b)})
	return err
}

// CheckConsumer runs the security checks of im.file.security in its own consumer group. A check
// that cannot run (storage or MySQL down) is retried with a growing pause, up to a minute, before
// the partition moves on; a record that is not a task is logged and skipped.
type CheckConsumer struct {
	Group   sarama.ConsumerGroup
	Topic   string
	Service *Service
	Logger  *slog.Logger
}

// Run consumes until ctx ends, then closes the group. It returns nil after ctx ended, and an error
// wrapping sarama.ErrClosedConsumerGroup when the group was closed elsewhere.
func (c CheckConsumer) Run(ctx context.Context) error {
	if c.Group == nil || c.Service == nil || c.Topic == "" {
		return errors.New("files: check consumer needs a group, the topic and the service")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return kafka.RunGroup(ctx, c.Group, []string{c.Topic}, checkHandler{c}, kafka.LogReport(c.Logger))
}

type checkHandler struct{ c CheckConsumer }

func (checkHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (checkHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h checkHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	ctx := sess.Context()
	for m := range claim.Messages() {
		t, err := ParseTask(m.Value)
		if err != nil {
			h.c.Logger.WarnContext(ctx, "files: bad check task", "offset", m.Offset, "err", err)
			sess.MarkMessage(m, "")
			continue
		}
		wait := 100 * time.Millisecond
		for deadline := time.Now().Add(time.Minute); ; {
			err = h.c.Service.Check(ctx, t)
			if err == nil || ctx.Err() != nil || time.Now().After(deadline) {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, 5*time.Second)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			h.c.Logger.ErrorContext(ctx, "files: security check gave up", "tenant_id", t.TenantID.String(), "file_id", t.FileID, "err", err)
		}
		sess.MarkMessage(m, "")
	}
	return nil
}

// RunCollector runs Collect for every tenant tenants lists, every Config.GCInterval, until ctx
// ends. Failures are logged and retried at the next round.
func RunCollector(ctx context.Context, s *Service, tenants func(context.Context) ([]domain.TenantID, error), log *slog.Logger) {
	t := time.NewTicker(s.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ts, err := tenants(ctx)
		if err != nil {
			log.WarnContext(ctx, "files: list tenants to collect", "err", err)
			continue
		}
		for _, tenant := range ts {
			n, err := s.Collect(ctx, tenant)
			if err != nil {
				log.WarnContext(ctx, "files: collect", "tenant_id", tenant.String(), "err", err)
			}
			if n > 0 {
				log.InfoContext(ctx, "files: collected unreferenced files", "tenant_id", tenant.String(), "files", n)
			}
		}
	}
}
