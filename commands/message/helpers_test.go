package message_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/commands/seq"
	"github.com/imledger/imledger/commands/storetest"
	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/testenv"
)

// testCtx returns a context that ends with the test or after two minutes.
func testCtx(t testing.TB) context.Context { return testenv.Context(t) }

// sendEnv is a migrated database, a Redis key prefix and a handler over both.
type sendEnv struct {
	tenant domain.TenantID
	pool   *pgxpool.Pool
	store  *eventstore.Store
	rdb    *redis.Client
	prefix string
	keys   *seq.Allocator // computes the handler's key names (same prefix)
	h      *message.SendMessageHandler
}

// newPostgres migrates a fresh database and returns a pool over it with maxConns connections.
func newPostgres(t testing.TB, maxConns int32) (*pgxpool.Pool, *eventstore.Store) {
	t.Helper()
	return storetest.EventStore(t, maxConns)
}

// newSendEnv builds a handler over a fresh database and key prefix; cfg's Seq.KeyPrefix is set.
func newSendEnv(t testing.TB, cfg message.SendMessageConfig) *sendEnv {
	t.Helper()
	pool, store := newPostgres(t, 16)
	rdb, prefix := testenv.Redis(t)
	cfg.Seq.KeyPrefix = prefix
	keys, err := seq.New(rdb, cfg.Seq)
	if err != nil {
		t.Fatal(err)
	}
	e := &sendEnv{tenant: domain.MustTenantID("acme"), pool: pool, store: store, rdb: rdb, prefix: prefix, keys: keys}
	e.h = e.handler(t, message.SendMessageDeps{}, cfg)
	return e
}

// handler starts another handler over the environment; deps' Store and Redis default to the
// environment's.
func (e *sendEnv) handler(t testing.TB, deps message.SendMessageDeps, cfg message.SendMessageConfig) *message.SendMessageHandler {
	t.Helper()
	if deps.Store == nil {
		deps.Store = e.store
	}
	if deps.Redis == nil {
		deps.Redis = e.rdb
	}
	cfg.Seq.KeyPrefix = e.prefix
	h, err := message.NewSendMessageHandler(deps, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(testCtx(t)))
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		_ = h.Run(runCtx)
	}()
	t.Cleanup(func() {
		_ = h.Close()
		stop()
		<-ran
	})
	return h
}

// cmd builds a valid text send.
func (e *sendEnv) cmd(t testing.TB, topic string, from domain.UserID, clientMsgID, text string) message.SendMessage {
	t.Helper()
	content, _ := json.Marshal(text)
	c, err := message.NewSendMessage(message.SendMessageInput{
		Tenant: e.tenant.String(), From: from.String(), Topic: topic, ClientMsgID: clientMsgID, Content: content,
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// countEvents returns the number of stored events.
func (e *sendEnv) countEvents(t testing.TB) int64 {
	t.Helper()
	n, err := e.store.Count(testCtx(t), eventstore.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// redisKeys returns every key under the environment's prefix but the handlers' heartbeats.
func (e *sendEnv) redisKeys(t testing.TB) []string {
	t.Helper()
	ctx := testCtx(t)
	var keys []string
	iter := e.rdb.Scan(ctx, 0, e.prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if !strings.HasPrefix(iter.Val(), e.prefix+"node:") {
			keys = append(keys, iter.Val())
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// loseRedisKeys deletes every key under the environment's prefix, as if Redis had lost its data.
// It never runs FLUSHALL: other tests share this Redis.
func (e *sendEnv) loseRedisKeys(t testing.TB) int {
	t.Helper()
	keys := e.redisKeys(t)
	if len(keys) > 0 {
		if err := e.rdb.Del(testCtx(t), keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return len(keys)
}

// stream reads every event of a topic in seq order.
func (e *sendEnv) stream(t testing.TB, topic string) []domain.Envelope {
	t.Helper()
	var out []domain.Envelope
	var after int64
	for {
		page, err := e.store.ReadStream(testCtx(t), e.tenant, topic, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].StreamVersion
	}
}

// sentPayload decodes a sent event's payload.
func sentPayload(t testing.TB, e domain.Envelope) domain.MessageSent {
	t.Helper()
	var p domain.MessageSent
	if err := e.Decode(&p); err != nil {
		t.Fatalf("decode payload at seq %d: %v", e.StreamVersion, err)
	}
	return p
}

// storedSeqs maps "<from>:<client_msg_id>" to the stored seq and message id of a topic.
func (e *sendEnv) storedSeqs(t testing.TB, topic string) map[string]message.SendResult {
	t.Helper()
	out := make(map[string]message.SendResult)
	for _, ev := range e.stream(t, topic) {
		p := sentPayload(t, ev)
		k := fmt.Sprintf("%s:%s", p.From, p.ClientMsgID)
		if _, dup := out[k]; dup {
			t.Errorf("topic %s: %s stored twice", topic, k)
		}
		if ev.IdempotencyKey != k {
			t.Errorf("topic %s seq %d: idempotency key %q, want %q", topic, ev.StreamVersion, ev.IdempotencyKey, k)
		}
		out[k] = message.SendResult{Seq: ev.StreamVersion, MessageID: p.MessageID}
	}
	return out
}
