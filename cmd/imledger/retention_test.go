package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/tenant"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/msgstore"
	"github.com/imledger/imledger/readmodels/tenantdb"
)

// retentionEnv is a migrated deployment of its own (PostgreSQL database, MySQL databases, Redis
// key prefix) with the stores a test writes the read models through, as the projectors would.
type retentionEnv struct {
	file     string
	template string
	prefix   string
	pool     *pgxpool.Pool
	store    *eventstore.Store
	registry *tenant.Registry
	msgs     *msgstore.Store
	hot      *hot.Store
	rdb      *redis.Client
}

// hotTTL keeps months-old messages in Redis, so retention has hot history to remove.
const hotTTL = 200 * 24 * time.Hour

func newRetentionEnv(ctx context.Context, t *testing.T) *retentionEnv {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	e := &retentionEnv{template: testenv.UniqueName("imret"), prefix: prefix, rdb: rdb}
	testenv.DropMySQLDatabasesAtCleanup(t, e.template+"_")
	pg := testenv.Postgres(t)
	e.file = filepath.Join(t.TempDir(), "config.yaml")
	yaml := fmt.Sprintf("postgres: {url: %q}\nmysql: {server_dsn: %q, database_template: \"%s_{tenant}\"}\nredis: {key_prefix: %q}\nhot: {ttl: %s}\n",
		pg, testenv.MySQLDSN, e.template, prefix, hotTTL)
	if err := os.WriteFile(e.file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, err := runCLI(t, "migrate", "--config", e.file); err != nil {
		t.Fatalf("migrate: %v\n%s", err, errOut)
	}
	var err error
	if e.pool, err = pgxpool.New(ctx, pg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.pool.Close)
	if e.store, err = eventstore.New(e.pool, eventstore.Config{}); err != nil {
		t.Fatal(err)
	}
	router, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN, DatabaseTemplate: e.template + "_" + tenantdb.TenantPlaceholder})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = router.Close() })
	if e.registry, err = tenant.New(tenant.Deps{Pool: e.pool, Store: e.store, Databases: router}); err != nil {
		t.Fatal(err)
	}
	e.msgs = msgstore.NewStore(router)
	if e.hot, err = hot.NewStore(rdb, hot.Config{Prefix: prefix, TTL: hotTTL}, nil); err != nil {
		t.Fatal(err)
	}
	return e
}

// sent builds the sent event of a text message at seq of topic, sent (and stored) at at.
func sent(t *testing.T, tn domain.TenantID, topic domain.Topic, seq int64, from domain.UserID, at time.Time) domain.Envelope {
	t.Helper()
	content, _ := json.Marshal(fmt.Sprintf("%s #%d", topic, seq))
	p := domain.MessageSent{MessageID: topic.String() + "-" + strconv.FormatInt(seq, 10), Topic: topic.String(),
		GroupID: topic.GroupID(), Seq: seq, From: from, ClientMsgID: "c" + strconv.FormatInt(seq, 10), MsgType: domain.MsgText,
		Content: content, SentAt: at}
	if topic.Kind() == domain.TopicDirect {
		p.To = topic.Peer(from)
	}
	e, err := domain.NewEnvelope(tn, topic.String(), seq, domain.SentEventType(topic.Kind()), domain.Actor{Type: domain.ActorUser, ID: from.String()}, p)
	if err != nil {
		t.Fatal(err)
	}
	e.OccurredAt = at
	return e
}

// write appends events to the event store and projects them to MySQL and Redis.
func (e *retentionEnv) write(ctx context.Context, t *testing.T, tn domain.TenantID, events []domain.Envelope) {
	t.Helper()
	res, err := e.store.AppendBatch(ctx, events)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Status != eventstore.Appended {
			t.Fatalf("event %d: %v", i, r.Status)
		}
	}
	if _, err := e.msgs.Apply(ctx, tn, projections.GroupMessagesMySQL, msgstore.DefaultTables(), events); err != nil {
		t.Fatal(err)
	}
	if _, err := e.hot.ApplyBatch(ctx, tn, events); err != nil {
		t.Fatal(err)
	}
}

// mysqlMessages returns, by seq, whether each message row of topic in tenant's database still
// holds its content (false: a content-less marker).
func (e *retentionEnv) mysqlMessages(ctx context.Context, t *testing.T, tn string, topic domain.Topic) map[int64]bool {
	t.Helper()
	db, err := sql.Open("mysql", testenv.MySQLDSN+e.template+"_"+tn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	table := "im_group_messages"
	if topic.Kind() == domain.TopicDirect {
		table = "im_messages"
	}
	rows, err := db.QueryContext(ctx, "SELECT seqid, status, content IS NOT NULL AND from_user <> 0 FROM "+table+" WHERE topic = ?", topic.String())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]bool{}
	for rows.Next() {
		var (
			seq    int64
			status string
			held   bool
		)
		if err := rows.Scan(&seq, &status, &held); err != nil {
			t.Fatal(err)
		}
		if !held && status != "skipped" {
			t.Errorf("%s seq %d: status %s without content", topic, seq, status)
		}
		out[seq] = held
	}
	return out
}

// hotHeld returns whether Redis holds the hot snapshot of topic's seq.
func (e *retentionEnv) hotHeld(ctx context.Context, t *testing.T, tn string, topic domain.Topic, seq int64) bool {
	t.Helper()
	n, err := e.rdb.Exists(ctx, e.prefix+tn+":topic:{"+topic.String()+"}:hot_msg:"+strconv.FormatInt(seq, 10)).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// A tenant with a one-month horizon and messages over four months: after `imledger retention
// run` the history before the horizon is gone from MySQL (group and 1:1) and Redis while the
// newer history is intact, the expired month that only it used is dropped from the event store
// (the month another tenant still keeps is not), `replay --verify` matches the read models, and
// the other tenant is untouched.
func TestRetentionRemovesExpiredHistoryEverywhere(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := newRetentionEnv(ctx, t)
	for _, tn := range []string{"ret", "keep"} {
		if out, errOut, err := runCLI(t, "tenant", "create", tn, "--no-api-key", "--config", e.file); err != nil {
			t.Fatalf("tenant create %s: %v\n%s\n%s", tn, err, out, errOut)
		}
	}
	ret, keep := domain.MustTenantID("ret"), domain.MustTenantID("keep")
	if _, err := e.registry.SetConfig(ctx, ret, map[string]json.RawMessage{"retention_months": json.RawMessage("1")}, tenant.Meta{}); err != nil {
		t.Fatal(err)
	}

	now := time.Now().UTC().Truncate(time.Millisecond)
	this := domain.MonthStart(now)
	month := func(back int) time.Time { return this.AddDate(0, -back, 3).Add(time.Hour) } // the 4th of a month
	// seq i+1 of each topic was sent in months[i]: three months ago, two, one, and now.
	months := []time.Time{month(3), month(2), month(1), now.Add(-time.Second)}
	if _, err := e.store.EnsureMonths(ctx, months[0], now); err != nil {
		t.Fatal(err)
	}
	group, _ := domain.GroupTopic(901)
	direct, _ := domain.DirectTopic(11, 12)
	other, _ := domain.GroupTopic(902)
	var retEvents, keepEvents []domain.Envelope
	for i, at := range months {
		retEvents = append(retEvents, sent(t, ret, group, int64(i+1), 11, at), sent(t, ret, direct, int64(i+1), 11, at))
		if i > 0 { // the other tenant has nothing three months ago, so that month can go
			keepEvents = append(keepEvents, sent(t, keep, other, int64(i), 21, at))
		}
	}
	e.write(ctx, t, ret, retEvents)
	e.write(ctx, t, keep, keepEvents)
	for _, seq := range []int64{1, 4} {
		if !e.hotHeld(ctx, t, "ret", group, seq) {
			t.Fatalf("before retention Redis lacks seq %d of %s", seq, group)
		}
	}
	// The relay published everything (its own tests cover the tail; this drop needs its checkpoint).
	if _, err := e.pool.Exec(ctx, `INSERT INTO relay_checkpoints (name, tx_id, position)
		SELECT 'default', max(tx_id), max(position) FROM events`); err != nil {
		t.Fatal(err)
	}

	out, errOut, err := runCLI(t, "retention", "run", "--config", e.file)
	if err != nil {
		t.Fatalf("retention run: %v\n%s\n%s", err, out, errOut)
	}
	expired := "events_m" + months[0].Format("200601")
	keptMonth := "events_m" + months[1].Format("200601")
	if !strings.Contains(out, "tenant ret: history from the beginning to "+this.AddDate(0, -1, 0).Format(time.RFC3339)) ||
		!strings.Contains(out, "dropped "+expired) || strings.Contains(out, "dropped "+keptMonth) || strings.Contains(out, "tenant keep:") ||
		!strings.Contains(out, "kept: drop month partition "+keptMonth+": tenant keep keeps") {
		t.Errorf("retention run printed:\n%s", out)
	}

	for _, topic := range []domain.Topic{group, direct} {
		want := map[int64]bool{1: false, 2: false, 3: true, 4: true}
		if got := e.mysqlMessages(ctx, t, "ret", topic); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("MySQL %s after retention (seq: content held) = %v, want %v", topic, got, want)
		}
	}
	for seq, want := range map[int64]bool{1: false, 2: false, 3: true, 4: true} {
		if got := e.hotHeld(ctx, t, "ret", group, seq); got != want {
			t.Errorf("Redis holds seq %d of %s: %v, want %v", seq, group, got, want)
		}
	}
	if got := e.mysqlMessages(ctx, t, "keep", other); fmt.Sprint(got) != fmt.Sprint(map[int64]bool{1: true, 2: true, 3: true}) {
		t.Errorf("the other tenant's MySQL messages = %v, want all three intact", got)
	}
	for seq := int64(1); seq <= 3; seq++ {
		if !e.hotHeld(ctx, t, "keep", other, seq) {
			t.Errorf("the other tenant's Redis lost seq %d", seq)
		}
	}

	var gone, stays bool
	if err := e.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NULL, to_regclass($2) IS NOT NULL`, expired, keptMonth).Scan(&gone, &stays); err != nil {
		t.Fatal(err)
	}
	if !gone || !stays {
		t.Errorf("partition %s dropped: %v (want true); %s kept: %v (want true)", expired, gone, keptMonth, stays)
	}
	var oldest int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE tenant_id = 'ret' AND occurred_at < $1`, months[1].AddDate(0, 0, -3)).Scan(&oldest); err != nil || oldest != 0 {
		t.Errorf("events of ret before two months ago: %d, %v; want 0", oldest, err)
	}
	info, err := e.registry.Get(ctx, ret)
	if err != nil || !info.RetainedBefore.Equal(this.AddDate(0, -1, 0)) {
		t.Errorf("ret's recorded horizon = %v, %v; want %v", info.RetainedBefore, err, this.AddDate(0, -1, 0))
	}

	// The live projectors read a late delivery of expired history as expired too.
	for _, p := range []projections.Projection{projections.MessagesMySQL(e.msgs, ""), projections.MessagesHot(e.hot, "")} {
		if _, err := projections.WithRetention(p, e.registry).Applier.Apply(ctx, ret, retEvents[:4]); err != nil {
			t.Fatalf("%s: late expired events: %v", p.Name, err)
		}
	}
	if got := e.mysqlMessages(ctx, t, "ret", group); got[1] || got[2] {
		t.Errorf("a late delivery brought expired history back to MySQL: %v", got)
	}
	if e.hotHeld(ctx, t, "ret", group, 1) {
		t.Error("a late delivery brought expired history back to Redis")
	}

	for _, projection := range []string{"messages-mysql", "messages-hot"} {
		if out, errOut, err := runCLI(t, "replay", "--config", e.file, "--projection", projection, "--verify"); err != nil {
			t.Errorf("replay --verify %s after retention: %v\n%s\n%s", projection, err, out, errOut)
		}
	}
	// A second run finds nothing to do.
	out, _, err = runCLI(t, "retention", "run", "--config", e.file)
	if err != nil || strings.Contains(out, "tenant ret:") || strings.Contains(out, "dropped events_") {
		t.Errorf("second retention run: %v\n%s", err, out)
	}
}
