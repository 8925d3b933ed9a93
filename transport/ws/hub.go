package ws

import (
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/fanout"
)

// Hub is this node's topic registry: which local sessions are subscribed to which topic of
// which tenant. It implements fanout.Deliverer. It is safe for concurrent use.
type Hub struct {
	mu     sync.RWMutex
	topics map[hubKey]map[*session]domain.UserID // each session with its user
	users  map[userKey]map[*session]time.Time    // logged-in sessions with their token's issue time
	drops  [dropShards]atomic.Uint64             // control messages that ended subscriptions, by topic shard; changed under mu

	dmu      sync.Mutex
	dqueue   []delivery    // deliveries waiting for the delivery goroutine, in order
	dbusy    bool          // the delivery goroutine is delivering
	dwake    chan struct{} // wakes the delivery goroutine; nil until its first delivery
	dstarted sync.Once
}

// delivery is one message for the sessions of a topic, framed once.
type delivery struct {
	key  hubKey
	skip string
	wire []byte
}

// asyncSubscribers is the number of local subscribers from which a topic's messages are
// written by the hub's delivery goroutine rather than by the caller of Deliver, which is the
// sequencer's commit path: writing a message to hundreds of sockets there would hold back the
// acks of its batch and the next batch.
const asyncSubscribers = 32

// dropShards is how many counters the topics' drops are spread over: a sub only retries for a
// drop in its own shard, so changes to other topics rarely make it ask the Policy again.
const dropShards = 64

// dropShard returns k's drop counter.
func (h *Hub) dropShard(k hubKey) *atomic.Uint64 {
	f := fnv.New32a()
	_, _ = f.Write([]byte(k.tenant.String()))
	_, _ = f.Write([]byte{0})
	_, _ = f.Write([]byte(k.topic))
	return &h.drops[f.Sum32()%dropShards]
}

// hubKey names a topic of a tenant; tenants never share topics (seed 004 §5.2).
type hubKey struct {
	tenant domain.TenantID
	topic  string
}

var _ fanout.Deliverer = (*Hub)(nil)

// NewHub returns an empty Hub.
func NewHub() *Hub {
	return &Hub{topics: map[hubKey]map[*session]domain.UserID{}, users: map[userKey]map[*session]time.Time{}}
}

func (h *Hub) leave(k hubKey, s *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	set := h.topics[k]
	delete(set, s)
	if len(set) == 0 {
		delete(h.topics, k)
	}
}

// Subscribers returns the number of local sessions subscribed to a topic.
func (h *Hub) Subscribers(tenant domain.TenantID, topic domain.Topic) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.topics[hubKey{tenant, topic.String()}])
}

// Deliver queues m, as one encoded frame, to every local session subscribed to its topic except
// m.SkipSession. It never blocks: a session whose queue is full is disconnected instead. A
// fanout.KindControl message also ends the subscriptions it names (see control).
func (h *Hub) Deliver(m *fanout.Message) {
	switch m.Kind {
	case fanout.KindControl:
		h.control(m)
		return
	case fanout.KindAccount:
		h.account(m)
		return
	}
	frame := encodeMessage(m)
	if frame == nil {
		return
	}
	d := delivery{key: hubKey{m.Tenant, m.Topic.String()}, skip: m.SkipSession, wire: wireFrame(frame)}
	h.mu.RLock()
	many := len(h.topics[d.key]) >= asyncSubscribers
	h.mu.RUnlock()
	h.dmu.Lock()
	if many || h.dbusy || len(h.dqueue) > 0 { // behind earlier deliveries, so none is overtaken
		h.dqueue = append(h.dqueue, d)
		h.dstarted.Do(func() {
			h.dwake = make(chan struct{}, 1)
			go h.deliverLoop()
		})
		h.dmu.Unlock()
		select {
		case h.dwake <- struct{}{}:
		default:
		}
		return
	}
	h.dmu.Unlock()
	h.deliver(d)
}

// deliver writes d to the topic's sessions. It never blocks (see session.sendWire), so holding
// the read lock is cheap.
func (h *Hub) deliver(d delivery) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.topics[d.key] {
		if s.id != d.skip {
			s.sendWire(d.wire)
		}
	}
}

// deliverLoop is the hub's delivery goroutine: it delivers queued messages in order.
func (h *Hub) deliverLoop() {
	var batch []delivery
	for range h.dwake {
		for {
			h.dmu.Lock()
			if len(h.dqueue) == 0 {
				h.dbusy = false
				h.dmu.Unlock()
				break
			}
			batch, h.dqueue = h.dqueue, batch[:0]
			h.dbusy = true
			h.dmu.Unlock()
			for i, d := range batch {
				h.deliver(d)
				batch[i] = delivery{}
			}
		}
	}
}

// Publish delivers m on this node only; it makes a Hub a Publisher for a single node.
func (h *Hub) Publish(m *fanout.Message) { h.Deliver(m) }

// encodeMessage is the server frame of a fanout message; nil for an unknown kind.
func encodeMessage(m *fanout.Message) []byte {
	switch m.Kind {
	case fanout.KindData:
		return dataFromFanout(m)
	case fanout.KindInfo:
		i := infoFrame{Topic: m.Topic.String(), From: m.From.String(), What: m.What}
		if m.Seq > 0 {
			i.Seq = formatSeq(m.Seq)
		}
		return encodeInfo(i)
	case fanout.KindPres:
		return encodePres(presFrame{Topic: m.Topic.String(), What: m.What, Src: m.From.String()})
	case fanout.KindChange:
		return encodeMessageChange(m)
	}
	return nil
}
