package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/kafkabroker"
	"github.com/imledger/imledger/transport/presence"
	"github.com/imledger/imledger/transport/push"
)

// benchPushOptions are the flags of bench push.
type benchPushOptions struct {
	tenant   string
	members  int
	online   int
	messages int
	latency  time.Duration
	window   time.Duration
	timeout  time.Duration
}

func newBenchPushCmd() *cobra.Command {
	var o benchPushOptions
	cmd := &cobra.Command{
		Use:   "push",
		Short: "Offline reminders for one group: tasks produced, reminders sent, time to drain",
		Long: "bench push starts a node in this process (the embedded broker unless kafka.brokers is set), writes a\n" +
			"group of --members into the tenant's read model with a webhook device each, logs --online of them in,\n" +
			"then commits --messages messages to the group through the push producer and waits until the push worker\n" +
			"has sent one reminder to every offline member through a webhook provider (an httptest server in this\n" +
			"process answering after --latency). It prints the tasks produced, the reminders sent and coalesced, the\n" +
			"time to produce and to drain, and the process's CPU seconds.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchPush(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.tenant, "tenant", "benchpush", "tenant of the group (provisioned when missing)")
	f.IntVar(&o.members, "members", 10000, "members of the group")
	f.IntVar(&o.online, "online", 500, "members online (the sender is one of them)")
	f.IntVar(&o.messages, "messages", 1, "messages committed to the group, back to back")
	f.DurationVar(&o.latency, "latency", 20*time.Millisecond, "how long the provider takes to answer")
	f.DurationVar(&o.window, "window", time.Second, "push.window of the worker")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up waiting for the reminders after this")
	return cmd
}

func runBenchPush(cmd *cobra.Command, o benchPushOptions) error {
	t, err := domain.NewTenantID(o.tenant)
	if err != nil {
		return fmt.Errorf("--tenant: %w", err)
	}
	if o.online < 1 || o.online > o.members {
		return fmt.Errorf("--online must be between 1 and --members")
	}
	p, provider := newBenchPushProvider(o.latency)
	defer provider.Close()
	n, err := startBenchPushNode(cmd, o, provider.URL)
	if err != nil {
		return err
	}
	defer func() { _ = n.shutdown() }()
	ctx := cmd.Context()
	if n.pf.producer == nil {
		return fmt.Errorf("bench push: the node runs no push producer (MySQL off?)")
	}
	if _, err := n.registry.Provision(ctx, t, nil, tenant.Meta{}); err != nil {
		return err
	}
	gid := time.Now().UnixMilli() % 1_000_000_000
	if err := benchPushGroup(ctx, n, t, gid, o.members); err != nil {
		return err
	}
	topic, err := domain.GroupTopic(gid)
	if err != nil {
		return err
	}
	p.topic.Store(topic.String())
	for u := 1; u <= o.online; u++ {
		s, err := n.presence.Login(ctx, presence.LoginInfo{Tenant: t, User: domain.UserID(u), SessionID: "bench-" + strconv.Itoa(u)})
		if err != nil {
			return err
		}
		defer func() { _ = s.Logout(context.WithoutCancel(ctx)) }()
	}
	want := int64(o.members - o.online)
	tasks, produced, drained, cpu := p.measure(ctx, n, t, topic, o, want)
	load, _ := os.ReadFile("/proc/loadavg")
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "group of %d, %d online, %d offline; %d message(s); provider latency %s; window %s; concurrency %d\n",
		o.members, o.online, want, o.messages, o.latency, o.window, n.cfg.PushSettings().WithDefaults().Concurrency)
	fmt.Fprintf(out, "tasks produced:      %d in %s\n", tasks, produced.Round(time.Millisecond))
	fmt.Fprintf(out, "users reminded:      %d (want %d, one per offline member)\n", p.hits.Load(), want)
	fmt.Fprintf(out, "provider calls:      %d (more than users: calls retried after the client timed out)\n", p.calls.Load())
	fmt.Fprintf(out, "time to drain:       %s (first commit to last reminder, includes the %s window)\n", drained.Round(time.Millisecond), o.window)
	fmt.Fprintf(out, "process CPU:         %.2f s\n", cpu)
	fmt.Fprintf(out, "load average:        %s\n", strings.TrimSpace(string(load)))
	if p.hits.Load() != want {
		return fmt.Errorf("bench push: %d reminders, want %d", p.hits.Load(), want)
	}
	return nil
}

// benchPushProvider is the webhook provider of bench push: it counts the reminders of this
// run's topic, one per user.
type benchPushProvider struct {
	hits, last, calls atomic.Int64
	seen              sync.Map     // user ids reminded: a call retried after a client timeout reaches the provider twice
	topic             atomic.Value // this run's topic: a reused broker may still hold an earlier run's tasks
}

// newBenchPushProvider starts a provider whose server answers after latency.
func newBenchPushProvider(latency time.Duration) (*benchPushProvider, *httptest.Server) {
	p := &benchPushProvider{}
	p.topic.Store("")
	return p, httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b push.WebhookBody
		err := json.NewDecoder(r.Body).Decode(&b)
		time.Sleep(latency)
		if err == nil && b.Topic == p.topic.Load() {
			p.calls.Add(1)
			if _, dup := p.seen.LoadOrStore(b.UserID, true); !dup {
				p.hits.Add(1)
				p.last.Store(time.Now().UnixNano())
			}
		}
	}))
}

// startBenchPushNode starts the node of bench push, its push worker sending to the provider at
// providerURL, and nothing it does not measure.
func startBenchPushNode(cmd *cobra.Command, o benchPushOptions, providerURL string) (*node, error) {
	n, err := toolNode(cmd)
	if err != nil {
		return nil, err
	}
	n.cfg.HTTP.Addr = "127.0.0.1:0"
	if n.cfg.Kafka.UseEmbedded() {
		// A fresh broker, so an earlier run's unsent tasks do not compete for the provider, and
		// an event store of its own, so this node's relay never meets the checkpoint of the
		// relay that publishes to the configured broker.
		n.cfg.Kafka.Embedded.Addr, n.cfg.Kafka.Embedded.DataDir = "127.0.0.1:0", kafkabroker.InMemory
		u, err := url.Parse(n.cfg.Postgres.URL)
		if err != nil {
			return nil, fmt.Errorf("postgres.url: %w", err)
		}
		u.Path = "/imledger_benchpush"
		n.cfg.Postgres.URL = u.String()
	}
	n.cfg.Push.Run, n.cfg.Push.Webhook.URL, n.cfg.Push.Window = true, providerURL, o.window
	n.cfg.Projections.Run, n.cfg.Admin.Run, n.cfg.Files.Run = false, false, false // not measured here
	if n.cfg.Push.Concurrency == 0 {
		n.cfg.Push.Concurrency = 256
	}
	return startNode(cmd.Context(), n.cfg, n.log)
}

// measure commits o.messages messages to topic through n's push producer and waits, up to
// o.timeout, for want reminders, then for two windows more: any beyond one a user would show by
// then. It answers the tasks produced, the time to produce them, the time from the first commit
// to the last reminder and the process's CPU seconds meanwhile.
func (p *benchPushProvider) measure(ctx context.Context, n *node, t domain.TenantID, topic domain.Topic, o benchPushOptions,
	want int64) (tasks int, produced, drained time.Duration, cpu float64) {
	cpu0 := cpuSeconds()
	start := time.Now()
	for seq := int64(1); seq <= int64(o.messages); seq++ {
		tasks += n.pf.producer.Produce(ctx, message.CommittedMessage{Tenant: t, Topic: topic, From: 1, Seq: seq,
			MsgType: "text", SentAt: time.Now().UTC()})
	}
	produced = time.Since(start)
	deadline := time.Now().Add(o.timeout)
	for p.hits.Load() < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(2 * o.window) // anything beyond one per user would show now
	drained = time.Duration(p.last.Load() - start.UnixNano())
	return tasks, produced, drained, cpuSeconds() - cpu0
}

// benchPushGroup writes group gid with members 1..members and a webhook device each into the
// tenant's read model, as the business projector and the device endpoint would.
func benchPushGroup(ctx context.Context, n *node, t domain.TenantID, gid int64, members int) error {
	db, err := n.router.DB(ctx, t)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	if _, err := db.ExecContext(ctx, "INSERT INTO im_groups (group_id, topic, name, owner_id, member_count, status, version, created_at, updated_at)"+
		" VALUES (?, ?, 'bench', 1, ?, 'normal', 1, ?, ?)", gid, "grp"+strconv.FormatInt(gid, 10), members, now, now); err != nil {
		return err
	}
	for start := 1; start <= members; start += 1000 {
		end := min(start+999, members)
		var m, d []string
		var margs, dargs []any
		for u := start; u <= end; u++ {
			m = append(m, "(?, ?, 'member', 'member', ?, 1, ?)")
			margs = append(margs, gid, u, now, now)
			d = append(d, "(?, 'bench', 'webhook', ?, 'android', ?, ?)")
			dargs = append(dargs, u, "tok-"+strconv.Itoa(u), now, now)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO im_group_members (group_id, user_id, role, status, joined_at, version, updated_at) VALUES "+
			strings.Join(m, ", "), margs...); err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO im_push_devices (user_id, device_id, provider, token, platform, created_at, updated_at) VALUES "+
			strings.Join(d, ", ")+" ON DUPLICATE KEY UPDATE provider = VALUES(provider), token = VALUES(token)", dargs...); err != nil {
			return err
		}
	}
	return nil
}

// cpuSeconds is the user and system CPU time of this process so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
