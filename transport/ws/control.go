package ws

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/fanout"
)

// encodeChange is the info frame of a committed change: what changed in the topic, the user it
// concerns (src) and who made it (from), each omitted when there is none or it is unknown.
func encodeChange(m *fanout.Message) []byte {
	i := infoFrame{Topic: m.Topic.String(), What: m.What}
	if m.Src != 0 {
		i.Src = m.Src.String()
	}
	if m.From != 0 {
		i.From = m.From.String()
	}
	return encodeInfo(i)
}

// control applies a fanout.KindControl message on this node: every session subscribed to the
// topic is queued its info frame, and the sessions m.Drop names are taken out of the topic. One
// write lock covers both, so a message delivered after control returns never reaches a dropped
// session, and the dropped session's info frame is the last frame of the topic it gets. The
// dropped subscriptions leave presence in the background and the session's own topic list at
// its next frame, so a new sub goes through the Policy again. Channel sessions stop hearing the
// topic's messages as a subscription would (channelControl).
func (h *Hub) control(m *fanout.Message) {
	frame := encodeChange(m)
	k := hubKey{m.Tenant, m.Topic.String()}
	var dropped []*session
	h.mu.Lock()
	set := h.topics[k]
	for s, user := range set {
		s.send(frame)
		if m.Drop == fanout.DropAll || (m.Drop == fanout.DropUser && user == m.Src) {
			delete(set, s)
			s.drops.add(m.Topic)
			dropped = append(dropped, s)
		}
	}
	if len(set) == 0 {
		delete(h.topics, k)
	}
	var rewatch []*session
	if m.Drop != fanout.DropNone {
		h.dropShard(k).Add(1)
		rewatch = h.channelControl(m)
	}
	h.mu.Unlock()
	for _, s := range dropped {
		if s.pres != nil {
			go s.safely(s.g.life, func() { s.leavePresence(m.Tenant, m.Topic) })
		}
	}
	for _, s := range rewatch {
		s.syncWatchLater()
	}
}

// joinUnless subscribes s to k unless a control message ended subscriptions since the drop
// count of k's shard was epoch.
func (h *Hub) joinUnless(k hubKey, s *session, epoch uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dropShard(k).Load() != epoch {
		return false
	}
	set := h.topics[k]
	if set == nil {
		set = map[*session]domain.UserID{}
		h.topics[k] = set
	}
	set[s] = s.user
	return true
}

// maxAdmitAttempts bounds how often admit asks the Policy again.
const maxAdmitAttempts = 3

// admit asks the Policy whether the session may subscribe to t and joins the hub's topic if so.
// A control message that ends subscriptions while the Policy is being asked may concern this
// very user, and the answer may predate it: admit then asks again, so a sub racing a removal
// never outlives it. Only drops in the topic's shard count, so changes to other topics seldom
// cost a second question. After maxAdmitAttempts such races it fails with domain.ErrConcurrency.
func (s *session) admit(ctx context.Context, t domain.Topic) error {
	hub := s.g.deps.Hub
	k := hubKey{s.tenant, t.String()}
	shard := hub.dropShard(k)
	for range maxAdmitAttempts {
		epoch := shard.Load()
		if err := s.g.deps.Policy.CanSubscribe(ctx, s.tenant, s.user, t); err != nil {
			return err
		}
		if hub.joinUnless(k, s, epoch) {
			return nil
		}
	}
	return fmt.Errorf("subscribe to %s: subscriptions kept ending: %w", t, domain.ErrConcurrency)
}

// PublishControl delivers a control message on this node only; it makes a Hub a
// ControlPublisher for a single node.
func (h *Hub) PublishControl(_ context.Context, m *fanout.Message) error {
	h.Deliver(m)
	return nil
}

// dropSet holds the topics the hub took a session out of that the session's reader has not yet
// forgotten. The hub adds to it under its own lock, so mu is only ever held briefly; leaveMu
// orders the presence leaves of the background and the reader and is held across Redis calls.
type dropSet struct {
	pending atomic.Bool // topics is not empty: lets the reader skip the locks on every frame
	leaveMu sync.Mutex
	mu      sync.Mutex
	topics  map[string]*drop
}

// drop is one ended subscription.
type drop struct {
	topic domain.Topic
	left  bool // presence already left; guarded by dropSet.mu
}

func (d *dropSet) add(t domain.Topic) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.topics == nil {
		d.topics = map[string]*drop{}
	}
	d.topics[t.String()] = &drop{topic: t}
	d.pending.Store(true)
}

// take returns the pending drops and forgets them.
func (d *dropSet) take() map[string]*drop {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.topics
	d.topics = nil
	d.pending.Store(false)
	return out
}

// needsLeave reports whether the pending drop of t still has to leave presence.
func (d *dropSet) needsLeave(t domain.Topic) (*drop, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.topics[t.String()]
	return p, p != nil && !p.left
}

func (d *dropSet) markLeft(p *drop) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p.left = true
}

// leavePresence removes a dropped topic from the session's presence, unless the reader already
// forgot the drop (and left presence itself). A later sub of the topic joins presence only after
// this leave: the reader applies drops, under the same leaveMu, before it handles the sub.
func (s *session) leavePresence(tenant domain.TenantID, t domain.Topic) {
	s.drops.leaveMu.Lock()
	defer s.drops.leaveMu.Unlock()
	d, need := s.drops.needsLeave(t)
	if !need {
		return
	}
	ctx, cancel := context.WithTimeout(s.g.life, s.g.cfg.RequestTimeout)
	defer cancel()
	if err := s.pres.Leave(ctx, t); err != nil {
		// The reader tries again at the session's next frame.
		s.g.log.WarnContext(ctx, "ws: presence leave of a dropped topic failed", "tenant_id", tenant.String(),
			"topic", t.String(), "err", err)
		return
	}
	s.drops.markLeft(d)
}

// applyDrops makes the reader forget the subscriptions the hub ended, leaving presence for those
// the background leave has not done. The reader calls it before every frame.
func (s *session) applyDrops(ctx context.Context) {
	if !s.drops.pending.Load() {
		return
	}
	s.drops.leaveMu.Lock()
	defer s.drops.leaveMu.Unlock()
	for name, d := range s.drops.take() {
		s.topics.Delete(name)
		if d.left || s.pres == nil {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, s.g.cfg.RequestTimeout)
		if err := s.pres.Leave(lctx, d.topic); err != nil {
			s.g.log.WarnContext(ctx, "ws: presence leave of a dropped topic failed", "tenant_id", s.tenant.String(),
				"topic", name, "err", err)
		}
		cancel()
	}
}

// forgetDrops makes a closing session forget the subscriptions the hub ended, so its cleanup
// does not announce "off" in topics it was taken out of. Presence is left by the logout.
func (s *session) forgetDrops() {
	for name := range s.drops.take() {
		s.topics.Delete(name)
	}
}
