package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"log/slog"

	"github.com/imledger/imledger/commands/files"
	"github.com/imledger/imledger/commands/pushsettings"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/readmodels/filedb"
	"github.com/imledger/imledger/readmodels/pushdb"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/push"
	"github.com/imledger/imledger/transport/rest"
	"github.com/imledger/imledger/transport/ws"
)

// pushFiles are the node's offline push and file components; nil fields are off.
type pushFiles struct {
	producer *push.Producer
	pushdb   *pushdb.Store
	settings *pushsettings.Handler
	files    *files.Service
	filedb   *filedb.Store
	urls     rest.FileURLSigner
}

// startPushFiles starts the push task producer (which the send handler, built after, feeds) and
// worker, and the file service with its security-check consumer and collector. Both need MySQL
// (devices, mutes, file records) and the node's Kafka producer.
func (n *node) startPushFiles(ctx context.Context) error {
	if n.router == nil || n.producer == nil {
		return nil
	}
	if n.cfg.Push.Run {
		if err := n.startPush(ctx); err != nil {
			return err
		}
	}
	if n.cfg.Files.Run {
		return n.startFiles(ctx)
	}
	return nil
}

func (n *node) startPush(ctx context.Context) error {
	cfg := n.cfg.PushSettings().WithDefaults()
	metrics, err := push.NewMetrics(n.reg)
	if err != nil {
		return err
	}
	n.pf.pushdb = pushdb.New(n.router)
	if n.pf.settings, err = pushsettings.New(pushsettings.Deps{Store: n.store, PreLog: n.pf.pushdb}); err != nil {
		return err
	}
	topic := n.cfg.Kafka.Topic(kafka.TopicMessagePush)
	log := n.log.With("component", "push")
	deps := push.ProducerDeps{Members: n.biz, Presence: n.presence, Mutes: n.pf.pushdb,
		Publisher: push.SaramaPublisher{Producer: n.producer, Topic: topic}, Redis: n.rdb, Metrics: metrics, Logger: log}
	if n.hub != nil {
		deps.Local = n.hub
	}
	if n.pf.producer, err = push.NewProducer(deps, cfg); err != nil {
		return err
	}
	n.aux = append(n.aux, n.spawn(ctx, "push producer", n.pf.producer.Run))
	providers := map[string]push.Provider{}
	if cfg.JPush.AppKey != "" {
		providers[pushdb.ProviderJPush] = push.NewJPush(cfg.JPush)
	}
	if cfg.Webhook.URL != "" {
		providers[pushdb.ProviderWebhook] = push.NewWebhook(cfg.Webhook)
	}
	if len(providers) == 0 {
		log.Warn("no push provider configured (push.jpush.app_key, push.webhook.url): reminders are recorded as failed")
	}
	g, err := kafka.NewConsumerGroup(n.cfg.Kafka.Config, cfg.ConsumerGroup, false)
	if err != nil {
		return err
	}
	w, err := push.NewWorker(push.WorkerDeps{Group: g, Topic: topic, Redis: n.rdb, Store: n.pf.pushdb, Providers: providers,
		Metrics: metrics, Logger: log}, cfg)
	if err != nil {
		_ = g.Close()
		return err
	}
	n.aux = append(n.aux, n.spawn(ctx, "push worker", w.Run))
	return nil
}

func (n *node) startFiles(ctx context.Context) error {
	bucket, err := openBucket(ctx, n.cfg.Files.BucketURL, n.cfg.Files.Dir)
	if err != nil {
		return err
	}
	log := n.log.With("component", "files")
	n.pf.filedb = filedb.New(n.router)
	if n.pf.files, err = files.New(files.Deps{Bucket: bucket, Records: n.pf.filedb, Events: n.store, Keys: n.sealKeys(),
		Queue:    files.KafkaQueue{Producer: n.producer, Topic: n.cfg.Kafka.Topic(kafka.TopicFileSecurity)},
		Notifier: fileNotifier{fanout: n.fanout, log: n.log}, Logger: log}, n.cfg.Files.Config); err != nil {
		return err
	}
	key, err := n.fileSigningKey()
	if err != nil {
		return err
	}
	n.pf.urls = rest.FileURLSigner{Key: key, TTL: n.pf.files.Config().URLTTL}
	g, err := kafka.NewConsumerGroup(n.cfg.Kafka.Config, n.pf.files.Config().CheckGroup, false)
	if err != nil {
		return err
	}
	n.aux = append(n.aux, n.spawn(ctx, "file checks", files.CheckConsumer{Group: g,
		Topic: n.cfg.Kafka.Topic(kafka.TopicFileSecurity), Service: n.pf.files, Logger: log}.Run))
	svc, tenants := n.pf.files, n.router.Tenants
	n.aux = append(n.aux, n.spawn(ctx, "file collector", func(ctx context.Context) error {
		files.RunCollector(ctx, svc, tenants, log)
		return nil
	}))
	return nil
}

// fileSigningKey is files.signing_key, else an HMAC of the signing auth key, else random.
func (n *node) fileSigningKey() ([]byte, error) {
	if k := n.cfg.Files.SigningKey; k != "" {
		return []byte(k), nil
	}
	for _, k := range n.cfg.Auth.Keys {
		if k.ID == n.cfg.Auth.SigningKeyID || n.cfg.Auth.SigningKeyID == "" {
			m := hmac.New(sha256.New, []byte(k.Secret))
			m.Write([]byte("imledger file download urls"))
			return m.Sum(nil), nil
		}
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return b, nil
}

// fileNotifier tells an uploader's sessions on every node that their file was rejected, over the
// node's fanout.
type fileNotifier struct {
	fanout *fanout.Fanout
	log    *slog.Logger
}

var _ files.Notifier = fileNotifier{}

// FileRejected implements files.Notifier.
func (f fileNotifier) FileRejected(ctx context.Context, tenant domain.TenantID, uploader domain.UserID, fileID, reason string) {
	if err := f.fanout.Broadcast(ctx, ws.FileRejectedNotice(tenant, uploader, fileID, reason)); err != nil {
		f.log.WarnContext(ctx, "tell uploader of a rejected file", "tenant_id", tenant.String(), "err", err)
	}
}
