package push_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/business"
	"github.com/imledger/imledger/readmodels/pushdb"
	"github.com/imledger/imledger/transport/push"
)

func decodeJSON(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// A group of 50 with 10 members online (the sender among them) and 2 who muted it: one message
// gives exactly 38 tasks, none for an online or muted member, each with only the task fields.
func TestOneMessageTasksOfflineUnmutedMembers(t *testing.T) {
	t.Parallel()
	f := setup(t, push.Config{})
	topic := f.group(t, 7, 50)
	f.online(t, users(1, 10)...)
	for _, u := range []domain.UserID{11, 12} {
		f.mute(t, topic, u)
	}
	if n := f.producer.Produce(f.ctx, f.message(topic, 1, 1)); n != 38 {
		t.Fatalf("produced %d tasks, want 38", n)
	}
	tasks := f.tasks(t, 38)
	if len(tasks) != 38 {
		t.Fatalf("im.message.push holds %d tasks, want 38", len(tasks))
	}
	seen := map[domain.UserID]bool{}
	for _, task := range tasks {
		if task.UserID <= 12 || task.UserID > 50 || seen[task.UserID] {
			t.Errorf("task for user %d: online, muted, unknown or repeated", task.UserID)
		}
		seen[task.UserID] = true
		if task.Type != push.TypeGroupMessage || task.Topic != "grp7" || task.Seq != 1 || task.TenantID != f.tenant {
			t.Errorf("task %+v", task)
		}
	}
	if got := testutil.ToFloat64(f.metrics.Triggered); got != 38 {
		t.Errorf("imledger_push_triggered_total = %v, want 38", got)
	}
}

// subscribedHere is a node's sessions by topic, as the WebSocket hub reports them.
type subscribedHere map[domain.Topic]map[domain.UserID]bool

func (s subscribedHere) SubscribedUsers(_ domain.TenantID, t domain.Topic) map[domain.UserID]bool {
	return s[t]
}

// Members subscribed to the conversation on this node got the message in realtime: offline by
// presence or not, they get no task, and a conversation whose recipients are all here gives none.
func TestMembersSubscribedHereGetNoTask(t *testing.T) {
	t.Parallel()
	f := setup(t, push.Config{})
	topic := f.group(t, 9, 5)
	deps := f.deps
	deps.Local = subscribedHere{topic: {1: true, 2: true, 3: true}}
	p, err := push.NewProducer(deps, f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := p.Tasks(f.ctx, f.message(topic, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	var got []domain.UserID
	for _, task := range tasks {
		got = append(got, task.UserID)
	}
	if len(got) != 2 || got[0] != 4 || got[1] != 5 {
		t.Fatalf("tasks for %v, want users 4 and 5 (1 sent, 2 and 3 are subscribed here)", got)
	}
	deps.Local = subscribedHere{topic: {1: true, 2: true, 3: true, 4: true, 5: true}}
	if p, err = push.NewProducer(deps, f.cfg); err != nil {
		t.Fatal(err)
	}
	if tasks, err := p.Tasks(f.ctx, f.message(topic, 1, 2)); err != nil || len(tasks) != 0 {
		t.Fatalf("every member here: tasks %+v, error %v; want none", tasks, err)
	}
}

// A muted member who is @mentioned still gets a task, of type mention.
func TestMentionReachesMutedMember(t *testing.T) {
	t.Parallel()
	f := setup(t, push.Config{})
	topic := f.group(t, 8, 5)
	f.online(t, 1)
	f.mute(t, topic, 2)
	tasks, err := f.producer.Tasks(f.ctx, f.message(topic, 1, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	types := map[domain.UserID]string{}
	for _, task := range tasks {
		types[task.UserID] = task.Type
	}
	if len(tasks) != 4 || types[2] != push.TypeMention || types[3] != push.TypeGroupMessage {
		t.Fatalf("tasks %+v, want users 2 (mention), 3, 4, 5", tasks)
	}
	none, err := f.producer.Tasks(f.ctx, f.message(topic, 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range none {
		if task.UserID == 2 {
			t.Fatal("a muted member got a task without a mention")
		}
	}
}

// A burst of 20 messages to a group with 38 offline members gives each of them one reminder
// with a count of 20; the dedupe key stops a redelivered task; later messages stay quiet for a
// user who was reminded and has not been online since, until they come back.
func TestBurstCoalescesToOneReminderPerUser(t *testing.T) {
	t.Parallel()
	f := setup(t, push.Config{})
	topic := f.group(t, 9, 50)
	f.online(t, users(1, 10)...)
	for _, u := range []domain.UserID{11, 12} {
		f.mute(t, topic, u)
	}
	f.devices(t, pushdb.ProviderWebhook, users(11, 50)...)
	hook := newWebhookServer(t, nil)
	f.startWorker(t, push.Config{Window: 3 * time.Second}, map[string]push.Provider{
		pushdb.ProviderWebhook: push.NewWebhook(push.WebhookConfig{URL: hook.URL, Timeout: time.Second})})
	for seq := int64(1); seq <= 20; seq++ {
		if n := f.producer.Produce(f.ctx, f.message(topic, 1, seq)); n != 38 {
			t.Fatalf("message %d: %d tasks, want 38", seq, n)
		}
	}
	waitFor(t, "38 reminders", 30*time.Second, func() bool { return len(hook.accepted()) >= 38 })
	time.Sleep(time.Second) // nothing more may come
	got := hook.accepted()
	if len(got) != 38 {
		t.Fatalf("%d reminders, want 38", len(got))
	}
	per := map[string]int{}
	for _, b := range got {
		per[b.UserID]++
		if b.Count != 20 || b.Seq != "20" || b.Topic != "grp9" || b.Type != push.TypeGroupMessage || b.TenantID != f.tenant.String() {
			t.Errorf("reminder %+v, want count 20 for seq 20 of grp9", b)
		}
	}
	if len(per) != 38 {
		t.Errorf("reminders went to %d users, want 38 distinct", len(per))
	}
	if c := testutil.ToFloat64(f.metrics.Coalesced); c != 38*19 {
		t.Errorf("imledger_push_coalesced_total = %v, want %d", c, 38*19)
	}
	if s := testutil.ToFloat64(f.metrics.Sent); s != 38 {
		t.Errorf("imledger_push_sent_total = %v, want 38", s)
	}
	// Quiet: the reminded users are still offline, so the next message produces nothing for
	// them; user 13 comes online and goes again, and is reminded again.
	if n := f.producer.Produce(f.ctx, f.message(topic, 1, 21)); n != 0 {
		t.Fatalf("message 21: %d tasks for users reminded already, want 0", n)
	}
	s, err := f.pres.Login(f.ctx, pushLogin(f, 13))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Logout(f.ctx); err != nil {
		t.Fatal(err)
	}
	if n := f.producer.Produce(f.ctx, f.message(topic, 1, 22)); n != 1 {
		t.Fatalf("message 22: %d tasks, want 1 (the user back since the reminder)", n)
	}
}

// A provider that fails twice (HTTP 503) and then accepts is called three times and the reminder
// is recorded as sent after 3 attempts; one that refuses (HTTP 400) is not retried and is
// recorded as failed.
func TestProviderRetriedAndRecorded(t *testing.T) {
	t.Parallel()
	f := setup(t, push.Config{})
	topic, err := domain.DirectTopic(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	f.devices(t, pushdb.ProviderJPush, 2)
	f.devices(t, pushdb.ProviderWebhook, 1)
	var jpushAuth []string
	flaky := newWebhookServerFunc(t, func(n int, r *http.Request) int {
		u, p, _ := r.BasicAuth()
		jpushAuth = append(jpushAuth, u+":"+p)
		if n <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	refusing := newWebhookServer(t, func(int) int { return http.StatusBadRequest })
	f.startWorker(t, push.Config{Window: 200 * time.Millisecond, Retry: push.RetryConfig{MaxAttempts: 4, InitialInterval: 50 * time.Millisecond}},
		map[string]push.Provider{
			pushdb.ProviderJPush:   push.NewJPush(push.JPushConfig{URL: flaky.URL, AppKey: "app", MasterSecret: "secret", Timeout: time.Second}),
			pushdb.ProviderWebhook: push.NewWebhook(push.WebhookConfig{URL: refusing.URL, Timeout: time.Second}),
		})
	if n := f.producer.Produce(f.ctx, f.message(topic, 1, 1)); n != 1 {
		t.Fatalf("%d tasks for the peer, want 1", n)
	}
	if n := f.producer.Produce(f.ctx, f.message(topic, 2, 2)); n != 1 {
		t.Fatalf("%d tasks for the peer, want 1", n)
	}
	var log2, log1 []pushdb.LogEntry
	waitFor(t, "both reminders recorded", 20*time.Second, func() bool {
		log2, err = f.store.Log(f.ctx, f.tenant, 2, 10)
		if err != nil {
			t.Fatal(err)
		}
		log1, err = f.store.Log(f.ctx, f.tenant, 1, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(log2) > 0 && len(log1) > 0
	})
	if e := log2[0]; !e.Sent || e.Attempts != 3 || e.Provider != "jpush" || e.Seq != 1 {
		t.Errorf("user 2's record %+v, want sent after 3 attempts", e)
	}
	if flaky.requests() != 3 {
		t.Errorf("the flaky provider got %d calls, want 3", flaky.requests())
	}
	for _, a := range jpushAuth {
		if a != "app:secret" {
			t.Errorf("JPush basic auth %q, want app:secret", a)
		}
	}
	if e := log1[0]; e.Sent || e.Attempts != 1 || e.Error == "" {
		t.Errorf("user 1's record %+v, want failed after 1 attempt with the error", e)
	}
	if refusing.requests() != 1 {
		t.Errorf("the refusing provider got %d calls, want 1", refusing.requests())
	}
	if got := testutil.ToFloat64(f.metrics.Failed); got != 1 {
		t.Errorf("imledger_push_failed_total = %v, want 1", got)
	}
}

// A group's first messages commit while its creation is still being projected: the producer
// looks again once the read model holds the group, and its offline members get their reminders.
func TestMessageOfAGroupNotProjectedYetIsLookedAtAgain(t *testing.T) {
	t.Parallel()
	f := setup(t, push.Config{})
	topic, err := domain.GroupTopic(8)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	go func() { _ = f.producer.Run(ctx) }()
	f.producer.MessagesCommitted(f.ctx, []message.CommittedMessage{f.message(topic, 1, 1)})
	time.Sleep(400 * time.Millisecond) // past the first look, and the second
	f.group(t, 8, 3)
	tasks := f.tasks(t, 2)
	if len(tasks) != 2 {
		t.Fatalf("im.message.push holds %d tasks, want 2 (members 2 and 3)", len(tasks))
	}
	for _, task := range tasks {
		if task.UserID != 2 && task.UserID != 3 || task.Seq != 1 || task.Topic != "grp8" {
			t.Errorf("task %+v", task)
		}
	}
	if got := testutil.ToFloat64(f.metrics.Dropped.WithLabelValues("lookup_failed")); got != 0 {
		t.Errorf("lookup_failed = %v, want 0", got)
	}
}

// countingMembers counts the lookups a producer makes through a real business store.
type countingMembers struct {
	*business.Store
	one, many, groups atomic.Int64
}

func (c *countingMembers) MemberIDs(ctx context.Context, tenant domain.TenantID, gid domain.GroupID) ([]domain.UserID, error) {
	c.one.Add(1)
	return c.Store.MemberIDs(ctx, tenant, gid)
}

func (c *countingMembers) MemberIDsMany(ctx context.Context, tenant domain.TenantID, gids []domain.GroupID) ([][]domain.UserID, []error) {
	c.many.Add(1)
	c.groups.Add(int64(len(gids)))
	return c.Store.MemberIDsMany(ctx, tenant, gids)
}

// countingProducer is a producer of f whose member lookups go through a countingMembers.
func countingProducer(t *testing.T, f *fixture) (*push.Producer, *countingMembers) {
	t.Helper()
	counting := &countingMembers{Store: f.biz}
	deps := f.deps
	deps.Members = counting
	p, err := push.NewProducer(deps, f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, counting
}

// runProducer runs p until the returned stop is called; stop waits for Run to return nil.
func runProducer(t *testing.T, f *fixture, p *push.Producer) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// Run looks up the groups of every message queued, several commit batches together, once.
func TestQueuedMessagesLookUpEachGroupOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, push.Config{})
	seven, eight := f.group(t, 7, 5), f.group(t, 8, 4)
	p, counting := countingProducer(t, f)
	p.MessagesCommitted(f.ctx, []message.CommittedMessage{f.message(seven, 1, 1), f.message(eight, 1, 1)})
	p.MessagesCommitted(f.ctx, []message.CommittedMessage{f.message(seven, 1, 2), f.message(seven, 1, 3), f.message(eight, 1, 2)})
	stop := runProducer(t, f, p)
	// The first message of each group reminds its offline members: 2-5 of 7, 2-4 of 8.
	waitFor(t, "the reminders of both groups", 10*time.Second, func() bool { return testutil.ToFloat64(f.metrics.Triggered) >= 7 })
	stop()
	if one, many, groups := counting.one.Load(), counting.many.Load(), counting.groups.Load(); one != 0 || many != 1 || groups != 2 {
		t.Fatalf("%d single lookups, %d batched lookups of %d groups; want 0, 1 of 2", one, many, groups)
	}
}

// Messages committed one at a time within push.linger of each other have their groups looked up
// together; with the linger off, each commit is looked up at once.
func TestMessagesCommittedWithinTheLingerLookUpTogether(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		linger    time.Duration
		one, many int64
	}{{linger: 2 * time.Second, one: 0, many: 1}, {linger: -1, one: 3, many: 0}} {
		f := setup(t, push.Config{Linger: tc.linger})
		seven, eight, nine := f.group(t, 7, 3), f.group(t, 8, 3), f.group(t, 9, 3)
		p, counting := countingProducer(t, f)
		stop := runProducer(t, f, p)
		for _, g := range []domain.Topic{seven, eight, nine} {
			p.MessagesCommitted(f.ctx, []message.CommittedMessage{f.message(g, 1, 1)})
			time.Sleep(50 * time.Millisecond) // one commit at a time, as on a quiet node
		}
		// Each message reminds its group's two offline members.
		waitFor(t, "the reminders of the three groups", 10*time.Second, func() bool { return testutil.ToFloat64(f.metrics.Triggered) >= 6 })
		stop()
		if one, many := counting.one.Load(), counting.many.Load(); one != tc.one || many != tc.many {
			t.Errorf("linger %s: %d single lookups, %d batched lookups; want %d, %d", tc.linger, one, many, tc.one, tc.many)
		}
	}
}
