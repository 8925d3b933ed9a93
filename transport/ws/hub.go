package ws

import (
	"hash/fnv"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/smallmap"
	"github.com/imledger/imledger/transport/fanout"
)

// Hub is this node's topic registry: which local sessions are subscribed to which topic of
// which tenant. It implements fanout.Deliverer. It is safe for concurrent use.
type Hub struct {
	mu     sync.RWMutex
	topics map[hubKey]map[*session]domain.UserID          // each session with its user
	users  map[userKey]*smallmap.Map[*session, userToken] // logged-in sessions with their token
	watch  map[hubKey]map[*session]struct{}               // group topics' channel sessions (channel.go)
	drops  [dropShards]atomic.Uint64                      // control messages that ended subscriptions, by topic shard; changed under mu

	delivery []*deliveryShard // deliveries by topic: each shard keeps its topics' order
}

// delivery is one message for the sessions of a topic, framed once, or a control message to
// apply in the topic's order (done is closed once it is), or an item of a user's channel.
type delivery struct {
	key     hubKey
	skip    string
	wire    []byte
	msg     *fanout.Message // a committed message or change: its channel frame goes to channel sessions
	control *fanout.Message
	user    *fanout.Message // a KindUser item
	done    chan struct{}
}

// alone reports whether d is delivered by itself rather than in a run (deliverRun): a control
// message or a user's channel item.
func (d delivery) alone() bool { return d.control != nil || d.user != nil }

// deliveryShard is a queue of deliveries and the goroutine that writes them, in order. The
// caller of Deliver is usually the sequencer's commit path: writing there, even to the ten
// sockets of a small group, holds back the acks of its batch and the next batch, so every
// message is written here instead, by as many goroutines as there are CPUs, one per shard.
type deliveryShard struct {
	mu      sync.Mutex
	queue   []delivery    // deliveries waiting for the shard's goroutine, in order
	wake    chan struct{} // wakes the shard's goroutine
	started sync.Once

	// Owned by the shard's goroutine: what a run of deliveries writes to each session (see
	// deliverRun), kept between runs to spare the allocations.
	pending map[*session]int // index in order
	order   []pendingWrite
}

// pendingWrite is what a run of deliveries writes to one session: a shared frame, or the
// session's own buffer of joined frames.
type pendingWrite struct {
	s   *session
	b   []byte
	own bool // b is this session's buffer
}

// dropShards is how many counters the topics' drops are spread over: a sub only retries for a
// drop in its own shard, so changes to other topics rarely make it ask the Policy again.
const dropShards = 64

// dropShard returns k's drop counter.
func (h *Hub) dropShard(k hubKey) *atomic.Uint64 { return &h.drops[k.hash()%dropShards] }

// hash spreads topics over shards.
func (k hubKey) hash() uint32 {
	f := fnv.New32a()
	_, _ = f.Write([]byte(k.tenant.String()))
	_, _ = f.Write([]byte{0})
	_, _ = f.Write([]byte(k.topic))
	return f.Sum32()
}

// hubKey names a topic of a tenant; tenants never share topics (seed 004 §5.2).
type hubKey struct {
	tenant domain.TenantID
	topic  string
}

var _ fanout.Deliverer = (*Hub)(nil)

// NewHub returns an empty Hub.
func NewHub() *Hub {
	h := &Hub{topics: map[hubKey]map[*session]domain.UserID{}, users: map[userKey]*smallmap.Map[*session, userToken]{},
		watch: map[hubKey]map[*session]struct{}{}}
	h.delivery = make([]*deliveryShard, max(2, runtime.GOMAXPROCS(0)))
	for i := range h.delivery {
		h.delivery[i] = &deliveryShard{wake: make(chan struct{}, 1)}
	}
	return h
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

// hasUser reports whether a local session of user is subscribed to k.
func (h *Hub) hasUser(k hubKey, user domain.UserID) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, u := range h.topics[k] {
		if u == user {
			return true
		}
	}
	return false
}

// Subscribers returns the number of local sessions subscribed to a topic.
func (h *Hub) Subscribers(tenant domain.TenantID, topic domain.Topic) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.topics[hubKey{tenant, topic.String()}])
}

// SubscribedUsers returns the users with a session subscribed to the topic on this node (nil
// for none).
func (h *Hub) SubscribedUsers(tenant domain.TenantID, topic domain.Topic) map[domain.UserID]bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	set := h.topics[hubKey{tenant, topic.String()}]
	if len(set) == 0 {
		return nil
	}
	out := make(map[domain.UserID]bool, len(set))
	for _, u := range set {
		out[u] = true
	}
	return out
}

// Deliver queues m, as one encoded frame, to every local session subscribed to its topic except
// m.SkipSession, in the order Deliver was called for the topic. It never blocks on a session: a
// session whose queue is full is disconnected instead. A fanout.KindControl message also ends
// the subscriptions it names (see control), after the topic's messages delivered before it and
// before Deliver returns.
func (h *Hub) Deliver(m *fanout.Message) {
	k := hubKey{m.Tenant, m.Topic.String()}
	switch m.Kind {
	case fanout.KindControl:
		done := make(chan struct{})
		h.enqueue(delivery{key: k, control: m, done: done})
		<-done
		return
	case fanout.KindAccount:
		h.account(m)
		return
	case fanout.KindUser:
		if m.To > 0 && len(m.Content) > 0 {
			h.enqueue(delivery{key: hubKey{m.Tenant, "@" + m.To.String()}, user: m})
		}
		return
	}
	frame := encodeMessage(m)
	if frame == nil {
		return
	}
	d := delivery{key: k, skip: m.SkipSession, wire: wireFrame(frame)}
	if m.Kind == fanout.KindData || m.Kind == fanout.KindChange {
		d.msg = m
	}
	h.enqueue(d)
}

// enqueue hands d to its topic's delivery shard.
func (h *Hub) enqueue(d delivery) {
	sh := h.delivery[d.key.hash()%uint32(len(h.delivery))]
	sh.mu.Lock()
	sh.queue = append(sh.queue, d)
	sh.mu.Unlock()
	sh.started.Do(func() { go h.deliverLoop(sh) })
	select {
	case sh.wake <- struct{}{}:
	default:
	}
}

// deliver writes d to the topic's sessions. It never blocks (see session.sendWire), so holding
// the read lock is cheap.
func (h *Hub) deliver(d delivery) {
	switch {
	case d.control != nil:
		h.control(d.control)
		close(d.done)
		return
	case d.user != nil:
		h.deliverUser(d.user)
		return
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.topics[d.key] {
		if s.id != d.skip {
			s.sendWire(d.wire)
		}
	}
	if d.msg != nil {
		h.deliverChannels(d, (*session).sendWireAny)
	}
}

// deliverLoop is a delivery shard's goroutine: it delivers the shard's queue in order. What
// queued up while it wrote is delivered together: each session gets the frames of all those
// messages in one write (see deliverRun), so the more the node has to deliver, the fewer system
// calls each message costs. A control message is a barrier: what came before it is written first.
func (h *Hub) deliverLoop(sh *deliveryShard) {
	var batch []delivery
	for range sh.wake {
		for {
			sh.mu.Lock()
			if len(sh.queue) == 0 {
				sh.mu.Unlock()
				break
			}
			batch, sh.queue = sh.queue, batch[:0]
			sh.mu.Unlock()
			for i := 0; i < len(batch); {
				j := i
				for j < len(batch) && !batch[j].alone() {
					j++
				}
				h.deliverRun(sh, batch[i:j])
				if j < len(batch) {
					h.deliver(batch[j])
					j++
				}
				i = j
			}
			clear(batch)
		}
	}
}

// deliverRun writes a run of message deliveries (no control message or item among them): one message
// alone as deliver does; several with the frames each session gets joined into one write, in
// the run's order. A session with one frame of the run is handed the shared frame; only one with
// more gets a buffer of its own (it may keep it queued, so it cannot share memory).
func (h *Hub) deliverRun(sh *deliveryShard, run []delivery) {
	switch len(run) {
	case 0:
		return
	case 1:
		h.deliver(run[0])
		return
	}
	if sh.pending == nil {
		sh.pending = map[*session]int{}
	}
	h.mu.RLock()
	for _, d := range run {
		for s := range h.topics[d.key] {
			if s.id == d.skip {
				continue
			}
			i, ok := sh.pending[s]
			if !ok {
				sh.pending[s] = len(sh.order)
				sh.order = append(sh.order, pendingWrite{s: s, b: d.wire})
				continue
			}
			w := &sh.order[i]
			if !w.own {
				w.b, w.own = append(make([]byte, 0, 2*(len(w.b)+len(d.wire))), w.b...), true
			}
			w.b = append(w.b, d.wire...)
		}
	}
	for _, d := range run {
		if d.msg != nil {
			h.deliverChannels(d, func(s *session, wire []byte) {
				sh.order = append(sh.order, pendingWrite{s: s, b: wire})
			})
		}
	}
	h.mu.RUnlock()
	for i, w := range sh.order {
		w.s.sendWire(w.b)
		sh.order[i] = pendingWrite{}
	}
	sh.order = sh.order[:0]
	clear(sh.pending)
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
