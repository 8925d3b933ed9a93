package message_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/commands/message"
	"github.com/imledger/imledger/internal/redisscript"
	"github.com/imledger/imledger/internal/testenv"
)

// keyRouter is a Router whose route of a topic is the value of its key under prefix.
type keyRouter struct {
	rdb    *redis.Client
	prefix string
}

func (r keyRouter) QueueRoutes(b *redisscript.Batch, topics []message.TopicRef) func() []*message.Route {
	at := time.Now()
	gets := make([]*redis.StringCmd, len(topics))
	for i, t := range topics {
		gets[i] = b.P.Get(context.Background(), r.prefix+"route:"+t.Topic.String())
	}
	return func() []*message.Route {
		out := make([]*message.Route, len(gets))
		for i, g := range gets {
			if v, err := g.Result(); err == nil {
				out[i] = &message.Route{Nodes: []string{v}, ReadAt: at}
			}
		}
		return out
	}
}

// pipelineLog records the commands of each pipeline (testenv.PipelineHook).
type pipelineLog struct {
	mu    sync.Mutex
	pipes [][]string
}

func (l *pipelineLog) seen(_ context.Context, cmds []redis.Cmder) {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = strings.ToLower(c.Name())
		if names[i] == "get" {
			names[i] += " " + c.Args()[1].(string)
		}
	}
	l.mu.Lock()
	l.pipes = append(l.pipes, names)
	l.mu.Unlock()
}

// TestRouterReadsRideTheAllocateRoundTrip: with a Router, each committed message carries the
// route read for its topic, and the read went to Redis in the pipeline that allocated its seq,
// not in a round trip of its own.
func TestRouterReadsRideTheAllocateRoundTrip(t *testing.T) {
	t.Parallel()
	e := newSendEnv(t, message.SendMessageConfig{})
	ctx := testCtx(t)
	for topic, node := range map[string]string{"grp1": "node-x", "grp2": "node-y"} {
		if err := e.rdb.Set(ctx, e.prefix+"route:"+topic, node, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rdb := redis.NewClient(e.rdb.Options())
	t.Cleanup(func() { _ = rdb.Close() })
	log := &pipelineLog{}
	rdb.AddHook(testenv.PipelineHook(log.seen))
	listener := &commitRecorder{}
	h := e.handler(t, message.SendMessageDeps{Redis: rdb, Listener: listener, Router: keyRouter{e.rdb, e.prefix}},
		message.SendMessageConfig{Partitions: 1})

	before := time.Now()
	for i, topic := range []string{"grp1", "grp2", "grp1"} {
		if _, err := h.Handle(ctx, e.cmd(t, topic, 7, string(rune('a'+i)), "hi")); err != nil {
			t.Fatal(err)
		}
	}
	after := time.Now()
	heard := listener.snapshot()
	if len(heard) != 3 {
		t.Fatalf("the listener heard %d messages, want 3", len(heard))
	}
	for _, m := range heard {
		want := map[string]string{"grp1": "node-x", "grp2": "node-y"}[m.Topic.String()]
		switch {
		case m.Route == nil:
			t.Errorf("%s seq %d: no route", m.Topic, m.Seq)
		case !slices.Equal(m.Route.Nodes, []string{want}):
			t.Errorf("%s seq %d: route %v, want [%s]", m.Topic, m.Seq, m.Route.Nodes, want)
		case m.Route.ReadAt.Before(before) || m.Route.ReadAt.After(after):
			t.Errorf("%s seq %d: route read at %v, not during the sends", m.Topic, m.Seq, m.Route.ReadAt)
		}
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	reads := 0
	for _, p := range log.pipes {
		for _, c := range p {
			if !strings.HasPrefix(c, "get "+e.prefix+"route:") {
				continue
			}
			reads++
			if !slices.Contains(p, "evalsha") {
				t.Errorf("a route was read in a round trip without an allocation: %v", p)
			}
		}
	}
	if reads != 3 {
		t.Errorf("routes read %d times, want once per send's batch (3)", reads)
	}
}
