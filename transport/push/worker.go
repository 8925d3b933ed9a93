package push

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/readmodels/pushdb"
)

// DeviceStore finds users' devices and records reminders; *pushdb.Store implements it.
type DeviceStore interface {
	Devices(ctx context.Context, tenant domain.TenantID, users []domain.UserID) (map[domain.UserID][]pushdb.Device, error)
	AppendLog(ctx context.Context, tenant domain.TenantID, entries []pushdb.LogEntry) error
}

// WorkerDeps are the collaborators of a Worker.
type WorkerDeps struct {
	Group     sarama.ConsumerGroup  // required: joined to Config.ConsumerGroup
	Topic     string                // required: the full name of im.message.push
	Redis     redis.UniversalClient // required: dedupe keys and quiet marks
	Store     DeviceStore           // required
	Providers map[string]Provider   // by the name devices give; a device naming another fails
	Metrics   *Metrics              // required
	Logger    *slog.Logger
}

// Worker consumes im.message.push and sends the reminders. Each partition's tasks are gathered
// for Config.Window from the first one; then the window's tasks are deduped (a task whose key
// im:{t}:push:dedup:{topic}:{seq}:{uid} exists is dropped), coalesced per user into one reminder
// (type mention when any task was, the latest topic and seq, the count of tasks), and sent to
// each of the user's devices. The partition's offset is marked once every reminder of the window
// was sent or recorded as failed, so a worker that dies mid-window leaves its tasks to the next
// one (the dedupe keys stop a second reminder for what was sent already).
type Worker struct {
	cfg  Config
	deps WorkerDeps
	keys keys
	log  *slog.Logger
}

// NewWorker validates its arguments; Run starts it.
func NewWorker(deps WorkerDeps, cfg Config) (*Worker, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Group == nil || deps.Topic == "" || deps.Redis == nil || deps.Store == nil || deps.Metrics == nil {
		return nil, errors.New("push: worker needs a consumer group, the topic, Redis, a device store and metrics")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Worker{cfg: cfg, deps: deps, keys: keys{cfg.KeyPrefix}, log: deps.Logger}, nil
}

// Run consumes until ctx ends, then closes the consumer group. It returns nil after ctx ended,
// and an error wrapping sarama.ErrClosedConsumerGroup when the group was closed elsewhere.
func (w *Worker) Run(ctx context.Context) error {
	return kafka.RunGroup(ctx, w.deps.Group, []string{w.deps.Topic}, handler{w}, kafka.LogReport(w.log))
}

type handler struct{ w *Worker }

func (handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

// ConsumeClaim gathers a window of tasks and flushes it.
func (h handler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	var batch []*sarama.ConsumerMessage
	var timer *time.Timer
	var fire <-chan time.Time
	flush := func() {
		if timer != nil {
			timer.Stop()
		}
		timer, fire = nil, nil
		if len(batch) == 0 {
			return
		}
		h.w.Process(sess.Context(), batch)
		if sess.Context().Err() == nil {
			sess.MarkMessage(batch[len(batch)-1], "")
		}
		batch = nil
	}
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				flush()
				return nil
			}
			batch = append(batch, m)
			if timer == nil {
				timer = time.NewTimer(h.w.cfg.Window)
				fire = timer.C
			}
			if len(batch) >= h.w.cfg.MaxPending {
				flush()
			}
		case <-fire:
			flush()
		case <-sess.Context().Done():
			return nil
		}
	}
}

// reminder is what one user gets for a window.
type reminder struct {
	user   domain.UserID
	typ    string
	topic  string
	seq    int64
	count  int
	topics map[string]bool
}

// Process sends the reminders of a window of records, the tenants' at the same time. Failures
// are logged, counted and recorded; it never fails.
func (w *Worker) Process(ctx context.Context, msgs []*sarama.ConsumerMessage) {
	byTenant := map[domain.TenantID][]Task{}
	var order []domain.TenantID
	for _, m := range msgs {
		t, err := ParseTask(m.Value)
		if err != nil {
			w.log.WarnContext(ctx, "push: bad task record", "partition", m.Partition, "offset", m.Offset, "err", err)
			continue
		}
		if _, seen := byTenant[t.TenantID]; !seen {
			order = append(order, t.TenantID)
		}
		byTenant[t.TenantID] = append(byTenant[t.TenantID], t)
	}
	// Tenants go at once, each with its own Config.Concurrency: one whose provider hangs or
	// retries does not hold another's reminders of the window for its whole retry schedule.
	var wg sync.WaitGroup
	for _, tenant := range order {
		wg.Go(func() { w.processTenant(ctx, tenant, byTenant[tenant]) })
	}
	wg.Wait()
}

// processTenant handles one tenant's tasks: a failure of this tenant's stores touches no other.
func (w *Worker) processTenant(ctx context.Context, tenant domain.TenantID, tasks []Task) {
	fresh, err := w.dedupe(ctx, tasks)
	if err != nil {
		w.log.WarnContext(ctx, "push: dedupe", "tenant_id", tenant.String(), "err", err)
		w.deps.Metrics.Failed.Add(float64(len(tasks)))
		return
	}
	rems := coalesce(fresh)
	for _, r := range rems {
		w.deps.Metrics.Coalesced.Add(float64(r.count - 1))
	}
	users := make([]domain.UserID, len(rems))
	for i, r := range rems {
		users[i] = r.user
	}
	devices, err := w.deps.Store.Devices(ctx, tenant, users)
	if err != nil {
		w.log.WarnContext(ctx, "push: read devices", "tenant_id", tenant.String(), "err", err)
		w.deps.Metrics.Failed.Add(float64(len(rems)))
		if ctx.Err() != nil {
			w.release(ctx, tenant, fresh, nil)
		}
		return
	}
	entries := w.send(ctx, tenant, rems, devices)
	if ctx.Err() != nil {
		// The window ends unmarked (a shutdown, a rebalance, typically while a slow provider held
		// its calls): the next worker gets these tasks again, and must send what was not sent.
		unsent := map[domain.UserID]bool{}
		for _, e := range entries {
			if !e.Sent {
				unsent[e.UserID] = true
			}
		}
		w.release(ctx, tenant, fresh, unsent)
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := w.deps.Store.AppendLog(lctx, tenant, entries); err != nil {
		w.log.WarnContext(ctx, "push: record reminders", "tenant_id", tenant.String(), "reminders", len(entries), "err", err)
	}
	w.markReminded(ctx, tenant, rems)
}

// recordTimeout bounds the writes that follow a window's sends (the reminder log, released dedupe
// keys), which outlive a worker stopped meanwhile.
const recordTimeout = 5 * time.Second

// release deletes the dedupe keys of the tasks of the users in only (of every task when only is
// nil), so that a redelivery sends their reminders.
func (w *Worker) release(ctx context.Context, tenant domain.TenantID, tasks []Task, only map[domain.UserID]bool) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	_, err := w.deps.Redis.Pipelined(rctx, func(p redis.Pipeliner) error {
		for _, t := range tasks {
			if only == nil || only[t.UserID] {
				p.Del(rctx, w.keys.dedup(t))
			}
		}
		return nil
	})
	if err != nil {
		w.log.WarnContext(ctx, "push: release dedupe keys", "tenant_id", tenant.String(), "err", err)
	}
}

// dedupe keeps the tasks whose dedupe key it could create (SET NX with Config.DedupTTL).
func (w *Worker) dedupe(ctx context.Context, tasks []Task) ([]Task, error) {
	cmds := make([]*redis.BoolCmd, len(tasks))
	_, err := w.deps.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range tasks {
			cmds[i] = p.SetNX(ctx, w.keys.dedup(t), "1", w.cfg.DedupTTL)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := tasks[:0:0]
	for i, c := range cmds {
		if c.Val() {
			out = append(out, tasks[i])
		} else {
			w.deps.Metrics.Deduped.Inc()
		}
	}
	return out, nil
}

// coalesce folds tasks into one reminder per user, in the order users first appear.
func coalesce(tasks []Task) []*reminder {
	by := map[domain.UserID]*reminder{}
	var out []*reminder
	for _, t := range tasks {
		r := by[t.UserID]
		if r == nil {
			r = &reminder{user: t.UserID, typ: t.Type, topics: map[string]bool{}}
			by[t.UserID] = r
			out = append(out, r)
		}
		r.count++
		r.topic, r.seq = t.Topic, t.Seq
		r.topics[t.Topic] = true
		if t.Type == TypeMention {
			r.typ = TypeMention
		}
	}
	return out
}

// send delivers every reminder to every device of its user, Config.Concurrency at a time, and
// returns what became of each.
func (w *Worker) send(ctx context.Context, tenant domain.TenantID, rems []*reminder, devices map[domain.UserID][]pushdb.Device) []pushdb.LogEntry {
	var mu sync.Mutex
	var entries []pushdb.LogEntry
	sem := make(chan struct{}, w.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, r := range rems {
		for _, d := range devices[r.user] {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				e := w.sendOne(ctx, tenant, r, d)
				mu.Lock()
				entries = append(entries, e)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return entries
}

func (w *Worker) sendOne(ctx context.Context, tenant domain.TenantID, r *reminder, d pushdb.Device) pushdb.LogEntry {
	e := pushdb.LogEntry{UserID: r.user, DeviceID: d.DeviceID, Provider: d.Provider, Topic: r.topic, Seq: r.seq,
		Count: r.count, At: time.Now().UTC()}
	p := w.deps.Providers[d.Provider]
	var err error
	if p == nil {
		err = errors.New("provider " + d.Provider + " is not configured")
	} else {
		e.Attempts, err = deliver(ctx, p, Notification{TenantID: tenant.String(), UserID: r.user.String(), DeviceID: d.DeviceID,
			Token: d.Token, Platform: d.Platform, Type: r.typ, Topic: r.topic, Seq: r.seq, Count: r.count}, w.cfg.Retry)
	}
	if err != nil {
		e.Error = err.Error()
		w.deps.Metrics.Failed.Inc()
		w.log.WarnContext(ctx, "push: reminder failed", "tenant_id", tenant.String(), "topic", r.topic,
			"provider", d.Provider, "attempts", e.Attempts, "err", err)
		return e
	}
	e.Sent = true
	w.deps.Metrics.Sent.Inc()
	return e
}

// markReminded stamps the time of each user's reminder on each topic it covered, so the producer
// stays quiet for them until they come back online (Config.QuietFor). Best effort.
func (w *Worker) markReminded(ctx context.Context, tenant domain.TenantID, rems []*reminder) {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	byTopic := map[string][]any{}
	for _, r := range rems {
		for topic := range r.topics {
			byTopic[topic] = append(byTopic[topic], r.user.String(), now)
		}
	}
	_, err := w.deps.Redis.Pipelined(ctx, func(p redis.Pipeliner) error {
		for topic, pairs := range byTopic {
			k := w.keys.reminded(tenant, topic)
			p.HSet(ctx, k, pairs...)
			p.PExpire(ctx, k, w.cfg.QuietFor)
		}
		return nil
	})
	if err != nil {
		w.log.WarnContext(ctx, "push: mark reminded", "tenant_id", tenant.String(), "err", err)
	}
}
