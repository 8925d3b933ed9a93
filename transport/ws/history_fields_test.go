package ws_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/relay"
	"github.com/imledger/imledger/domain"
	tkafka "github.com/imledger/imledger/internal/kafka"
	"github.com/imledger/imledger/internal/testenv"
	"github.com/imledger/imledger/projections"
	"github.com/imledger/imledger/readmodels/hot"
	"github.com/imledger/imledger/readmodels/msgstore"
	"github.com/imledger/imledger/readmodels/query"
	"github.com/imledger/imledger/readmodels/tenantdb"
	"github.com/imledger/imledger/transport/ws"
)

// readModels are the cluster's read models as serve feeds them: the relay publishes the event
// store to an embedded Kafka broker, and the projector writes acme's messages to a MySQL database
// of the test's own and to the Redis hot store under the cluster's key prefix.
type readModels struct {
	msgs *msgstore.Store
	hot  *hot.Store
}

func (c *cluster) readModels(t *testing.T) readModels {
	t.Helper()
	ctx := testCtx(t)
	log := slog.New(slog.DiscardHandler)
	testenv.MySQLServer(t)
	router, err := tenantdb.NewRouter(tenantdb.Config{ServerDSN: testenv.MySQLDSN,
		DatabaseTemplate: testenv.UniqueName("ws") + "_" + tenantdb.TenantPlaceholder})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = router.Close() })
	testenv.DropMySQLDatabasesAtCleanup(t, router.DatabaseName(acme))
	if err := router.Provision(ctx, acme); err != nil {
		t.Fatal(err)
	}
	rm := readModels{msgs: msgstore.NewStore(router)}
	if rm.hot, err = hot.NewStore(c.rdb, hot.Config{Prefix: c.prefix + "hot:"}, nil); err != nil {
		t.Fatal(err)
	}

	kcfg := tkafka.Config{Brokers: testenv.Kafka(t), TopicPrefix: testenv.UniqueName("ws") + ".", Partitions: 1}
	if err := tkafka.EnsureTopics(ctx, kcfg); err != nil {
		t.Fatal(err)
	}
	rl, err := relay.New(c.store, c.pool, relay.Config{Kafka: kcfg}, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := projections.EnsureSchema(ctx, c.pool); err != nil {
		t.Fatal(err)
	}
	proj, err := projections.NewProjector(projections.Config{Kafka: kcfg, LagInterval: time.Second, CloseTimeout: 5 * time.Second},
		projections.Deps{Postgres: c.pool, Logger: log},
		projections.MessagesMySQL(rm.msgs, "ws-test.messages-mysql"), projections.MessagesHot(rm.hot, "ws-test.messages-hot"))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for name, run := range map[string]func(context.Context) error{"relay": rl.Run, "projector": proj.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v", name, err)
			}
		}()
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	return rm
}

// readModelHistory answers get from a query.Reader and remembers which store served the last page.
type readModelHistory struct {
	r      *query.Reader
	mu     sync.Mutex
	source string
}

func (h *readModelHistory) History(ctx context.Context, tenant domain.TenantID, topic domain.Topic, viewer domain.UserID, q ws.HistoryQuery) (ws.HistoryPage, error) {
	p, err := h.r.History(ctx, tenant, topic, viewer, query.HistoryQuery{AfterSeq: q.AfterSeq, BeforeSeq: q.BeforeSeq, Limit: q.Limit})
	if err != nil {
		return ws.HistoryPage{}, err
	}
	h.mu.Lock()
	h.source = p.Source
	h.mu.Unlock()
	return ws.HistoryPage{Messages: p.Messages, LastSeq: p.LastSeq, HasMore: p.HasMore}, nil
}

func (h *readModelHistory) lastSource() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.source
}

// TestGetHistoryCarriesVersionAndUpdatedAt: a get answers each message with its content version
// and when it last changed, from MySQL and from the Redis hot store alike, so a client that only
// speaks WebSocket learns, after a reconnect or on another device, that a message was edited and
// which version an edit of it must name. The live frames agree: a new message's data frame is
// version 1 (it carries none), the edit's info frame carries the new version.
func TestGetHistoryCarriesVersionAndUpdatedAt(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	rm := c.readModels(t)
	for _, tc := range []struct {
		source string
		hot    *hot.Store
		topic  string
	}{
		{query.SourceMySQL, nil, "grp31"},
		{query.SourceRedis, rm.hot, "grp32"},
	} {
		t.Run(tc.source, func(t *testing.T) {
			ctx := testCtx(t)
			reader := query.NewReader(rm.msgs, tc.hot, slog.New(slog.DiscardHandler))
			history := &readModelHistory{r: reader}
			n := c.node(t, "node-"+tc.source, nodeOpts{history: history})
			alice := dial(t, n, "alice", dialOpts{})
			alice.login(c, 1)
			alice.sub(tc.topic)
			for i, text := range []string{"first draft", "as sent"} {
				id := []string{"p1", "p2"}[i]
				if r := alice.call(id, map[string]any{"pub": map[string]any{"id": id, "topic": tc.topic, "client_msg_id": id, "content": text}}); r.Code != 202 {
					t.Fatalf("pub %s = %+v", id, r)
				}
			}
			live := alice.waitFor("the live frames", func(fs []serverFrame) bool { return countData(fs) == 2 })
			for _, f := range live {
				if f.Data != nil && (f.Data.Version != "" || f.Data.UpdatedAt != "" || f.Data.MessageID == "") {
					t.Errorf("live data frame %+v: want a message_id and no version or updated_at (a new message is version 1)", *f.Data)
				}
			}

			content, err := domain.NewContent([]byte(`{"text":"fixed"}`), 0)
			if err != nil {
				t.Fatal(err)
			}
			topic := mustTopic(t, tc.topic)
			edit, err := n.ops.Edit(ctx, message.EditMessage{MessageRef: message.MessageRef{Tenant: acme, Topic: topic, Seq: 1, Actor: 1},
				Version: 1, Content: content})
			if err != nil {
				t.Fatal(err)
			}
			if info := alice.waitInfo(tc.topic, "edit"); info.Version != "2" || info.Seq != "1" || info.MessageID != edit.MessageID {
				t.Fatalf("edit info = %+v, want version 2 of seq 1, message %s", info, edit.MessageID)
			}

			// The read models trail the commits: wait until the store under test holds the edit.
			// (The first projected batch waits for the projector to join its consumer groups.)
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
				p, err := reader.History(ctx, acme, topic, 1, query.HistoryQuery{})
				if err == nil && p.Source == tc.source && len(p.Messages) == 2 && p.Messages[0].Version == 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the %s read model has not got the edit: page %+v, %v", tc.source, p, err)
				}
			}

			before := len(alice.data())
			if r := alice.call("g", map[string]any{"get": map[string]any{"id": "g", "topic": tc.topic, "after_seq": "0"}}); r.Code != 200 || r.Params["count"] != float64(2) {
				t.Fatalf("get = %+v", r)
			}
			if got := history.lastSource(); got != tc.source {
				t.Fatalf("the page came from %q, want %q", got, tc.source)
			}
			got := alice.data()[before:]
			if len(got) != 2 {
				t.Fatalf("history frames = %+v, want 2", got)
			}
			edited, unedited := got[0], got[1]
			// History may re-serialize content (spacing, key order).
			var text struct{ Text string }
			if err := json.Unmarshal(edited.Content, &text); err != nil || text.Text != "fixed" {
				t.Errorf("edited message's content in history = %s, want the new content", edited.Content)
			}
			if edited.Seq != "1" || edited.Version != "2" ||
				edited.UpdatedAt != edit.EditedAt.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z") {
				t.Errorf("edited message's history frame = %+v, want version 2 and updated_at %s", edited, edit.EditedAt)
			}
			if unedited.Seq != "2" || unedited.Version != "1" || unedited.UpdatedAt == "" || unedited.UpdatedAt != unedited.TS {
				t.Errorf("unedited message's history frame = %+v, want version 1 and updated_at equal to ts", unedited)
			}

			// The version a get answered is the one an edit must name: an edit of it is accepted.
			if _, err := n.ops.Edit(ctx, message.EditMessage{MessageRef: message.MessageRef{Tenant: acme, Topic: topic, Seq: 1, Actor: 1},
				Version: 2, Content: content}); err != nil {
				t.Errorf("edit from the version history gave: %v", err)
			}
		})
	}
}
