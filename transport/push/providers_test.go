package push_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/readmodels/pushdb"
	"github.com/imledger/imledger/transport/push"
)

// A provider that redirects is not followed: the reminder (the device token, the signature, the
// JPush credentials on the same host) goes to the configured URL only, and the redirect is a
// failure; a 302 or 301 is not turned into a GET whose 2xx counts as sent.
func TestProviderRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var elsewhere []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Method+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(other.Close)
	ctx := context.Background()
	n := push.Notification{TenantID: "acme", UserID: "2", DeviceID: "d2", Token: "tok-2", Type: push.TypeDirectMessage,
		Topic: "p2p_1_2", Seq: 1, Count: 1}
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound, http.StatusMovedPermanently} {
		redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/steal", status)
		}))
		t.Cleanup(redirecting.Close)
		for _, p := range []push.Provider{
			push.NewJPush(push.JPushConfig{URL: redirecting.URL, AppKey: "app", MasterSecret: "secret", Timeout: time.Second}),
			push.NewWebhook(push.WebhookConfig{URL: redirecting.URL, Secret: "s", Timeout: time.Second}),
		} {
			if err := p.Send(ctx, n); err == nil {
				t.Errorf("%s answered HTTP %d: sent, want a failure", p.Name(), status)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(elsewhere) != 0 {
		t.Errorf("the redirect target got %v", elsewhere)
	}
}

// A worker stopped (a shutdown, a rebalance) while a slow provider holds its calls leaves the
// window's tasks to the next worker, and the reminders it did not send are sent then: the dedupe
// keys it took for them must not drop them as sent already.
func TestReminderAbortedMidWindowIsSentByTheNextWorker(t *testing.T) {
	t.Parallel()
	f := setup(t, push.Config{})
	topic, err := domain.DirectTopic(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	f.devices(t, pushdb.ProviderWebhook, 2)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var mu sync.Mutex
	calls := 0
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the request's context ends with the connection only once it is read
		mu.Lock()
		calls++
		mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(slow.Close)
	cfg := push.Config{Window: 100 * time.Millisecond, Retry: push.RetryConfig{MaxAttempts: 1}}
	stop := f.startWorker(t, cfg, map[string]push.Provider{
		pushdb.ProviderWebhook: push.NewWebhook(push.WebhookConfig{URL: slow.URL, Timeout: time.Minute})})
	if n := f.producer.Produce(f.ctx, f.message(topic, 1, 1)); n != 1 {
		t.Fatalf("%d tasks for the peer, want 1", n)
	}
	waitFor(t, "the slow provider called", 20*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return calls > 0 })
	stop()
	hook := newWebhookServer(t, nil)
	f.startWorker(t, cfg, map[string]push.Provider{
		pushdb.ProviderWebhook: push.NewWebhook(push.WebhookConfig{URL: hook.URL, Timeout: time.Second})})
	waitFor(t, "the reminder sent by the next worker", 20*time.Second, func() bool { return len(hook.accepted()) == 1 })
}

// One tenant's reminders that hang on their provider do not hold another tenant's reminders of
// the same window: tenant A's device names a webhook that never answers, tenant B's a JPush that
// does, and B's reminder goes out at once instead of after A's whole retry schedule.
func TestHangingProviderOfOneTenantDoesNotHoldAnother(t *testing.T) {
	t.Parallel()
	f := setup(t, push.Config{})
	other := domain.MustTenantID(testenv.UniqueName("pushb"))
	testenv.DropMySQLDatabasesAtCleanup(t, f.router.DatabaseName(other))
	if err := f.router.Provision(f.ctx, other); err != nil {
		t.Fatal(err)
	}
	f.devices(t, pushdb.ProviderWebhook, 2)
	f.putDevice(t, other, pushdb.Device{UserID: 2, DeviceID: "d2", Provider: pushdb.ProviderJPush, Token: "tok-b2", Platform: "ios"})
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); hanging.Close() })
	jpush := newWebhookServerFunc(t, func(int, *http.Request) int { return http.StatusOK })
	w := f.worker(t, push.Config{Retry: push.RetryConfig{MaxAttempts: 3, InitialInterval: 50 * time.Millisecond}},
		map[string]push.Provider{
			pushdb.ProviderWebhook: push.NewWebhook(push.WebhookConfig{URL: hanging.URL, Timeout: time.Second}),
			pushdb.ProviderJPush:   push.NewJPush(push.JPushConfig{URL: jpush.URL, AppKey: "app", MasterSecret: "secret", Timeout: time.Second}),
		})
	window := windowOf(t, push.Task{Type: push.TypeDirectMessage, Topic: "p2p_1_2", Seq: 1, TenantID: f.tenant, UserID: 2},
		push.Task{Type: push.TypeDirectMessage, Topic: "p2p_1_2", Seq: 1, TenantID: other, UserID: 2})
	done := make(chan struct{})
	start := time.Now()
	go func() { defer close(done); w.Process(f.ctx, window) }()
	waitFor(t, "tenant B's reminder", 10*time.Second, func() bool { return jpush.requests() == 1 })
	if d := time.Since(start); d > time.Second {
		t.Errorf("tenant B's reminder went out after %s, held by tenant A's hanging provider", d.Round(time.Millisecond))
	}
	<-done
	logB, err := f.store.Log(f.ctx, other, 2, 10)
	if err != nil || len(logB) != 1 || !logB[0].Sent {
		t.Errorf("tenant B's log %+v, %v; want one sent", logB, err)
	}
	logA, err := f.store.Log(f.ctx, f.tenant, 2, 10)
	if err != nil || len(logA) != 1 || logA[0].Sent || logA[0].Attempts != 3 {
		t.Errorf("tenant A's log %+v, %v; want one failed after 3 attempts", logA, err)
	}
}

// worker is a worker over the fixture's stores for calling Process directly; its consumer group
// is never joined.
func (f *fixture) worker(t *testing.T, cfg push.Config, providers map[string]push.Provider) *push.Worker {
	t.Helper()
	sc, err := kafka.NewSaramaConfig(kafka.Config{Brokers: f.brokers})
	if err != nil {
		t.Fatal(err)
	}
	g, err := sarama.NewConsumerGroup(f.brokers, "push-test", sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Close() })
	cfg.KeyPrefix = f.prefix
	w, err := push.NewWorker(push.WorkerDeps{Group: g, Topic: f.topic, Redis: f.rdb, Store: f.store, Metrics: f.metrics,
		Providers: providers}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// windowOf is a window of records holding tasks.
func windowOf(t *testing.T, tasks ...push.Task) []*sarama.ConsumerMessage {
	t.Helper()
	var out []*sarama.ConsumerMessage
	for i, task := range tasks {
		b, err := task.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &sarama.ConsumerMessage{Value: b, Offset: int64(i)})
	}
	return out
}

// A provider's refusal whose body is not UTF-8, or whose text is cut inside a character, is
// recorded all the same, and so are the other reminders of the window: the log row's error must
// not make MySQL refuse the whole batch.
func TestRefusalWithBinaryBodyIsRecorded(t *testing.T) {
	t.Parallel()
	f := setup(t, push.Config{})
	f.devices(t, pushdb.ProviderWebhook, 2, 3)
	f.devices(t, pushdb.ProviderJPush, 4)
	bodies := map[string][]byte{
		"tok-2": {0xff, 0xfe, 0xfd, 'x', 0xc3},
		"tok-3": []byte(strings.Repeat("错误", 100)), // 600 bytes: cut at 512 inside a character
	}
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b push.WebhookBody
		if err := decodeJSON(r, &b); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(bodies[b.Token])
	}))
	t.Cleanup(hostile.Close)
	jpush := newWebhookServerFunc(t, func(int, *http.Request) int { return http.StatusOK })
	w := f.worker(t, push.Config{}, map[string]push.Provider{
		pushdb.ProviderWebhook: push.NewWebhook(push.WebhookConfig{URL: hostile.URL, Timeout: time.Second}),
		pushdb.ProviderJPush:   push.NewJPush(push.JPushConfig{URL: jpush.URL, AppKey: "app", MasterSecret: "secret", Timeout: time.Second}),
	})
	var tasks []push.Task
	for u := domain.UserID(2); u <= 4; u++ {
		tasks = append(tasks, push.Task{Type: push.TypeDirectMessage, Topic: "p2p_1_2", Seq: 1, TenantID: f.tenant, UserID: u})
	}
	w.Process(f.ctx, windowOf(t, tasks...))
	for u := domain.UserID(2); u <= 4; u++ {
		log, err := f.store.Log(f.ctx, f.tenant, u, 10)
		if err != nil || len(log) != 1 || log[0].Sent != (u == 4) || (u != 4 && !strings.HasPrefix(log[0].Error, "http 400")) {
			t.Errorf("user %d's log %+v, %v; want one row (sent only for user 4)", u, log, err)
		}
	}
}
