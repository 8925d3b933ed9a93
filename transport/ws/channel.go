package ws

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/transport/fanout"
	"github.com/imledger/imledger/transport/userchan"
)

// ChannelTopic is the name of the per-user channel in sub, leave and get frames.
const ChannelTopic = "me"

// chanState is what a session on its user's channel hears about besides its items, guarded by
// Hub.mu: the group topics whose messages reach it (the user's groups), and the 1:1 topics whose
// messages do not (a peer who blocks the user: as for a subscription, the blocker's new messages
// are not delivered).
type chanState struct {
	topics map[string]domain.Topic
	muted  map[string]struct{}
}

// channelOn puts s on its user's channel, watching groups and with the 1:1 topics of muted
// silenced. Calling it again replaces the state.
func (h *Hub) channelOn(s *session, groups, muted []domain.Topic) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unwatchAllLocked(s)
	st := &chanState{topics: make(map[string]domain.Topic, len(groups)), muted: map[string]struct{}{}}
	s.ch = st
	for _, t := range groups {
		h.watchLocked(s, t)
	}
	for _, t := range muted {
		st.muted[t.String()] = struct{}{}
	}
}

// channelOff takes s off its user's channel.
func (h *Hub) channelOff(s *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unwatchAllLocked(s)
	s.ch = nil
}

func (h *Hub) unwatchAllLocked(s *session) {
	if s.ch == nil {
		return
	}
	for _, t := range s.ch.topics {
		h.unwatchLocked(s, t)
	}
}

// watchLocked makes t's messages reach s's channel; h.mu is held and s is on its channel.
func (h *Hub) watchLocked(s *session, t domain.Topic) bool {
	if t.Kind() != domain.TopicGroup {
		return false
	}
	if _, ok := s.ch.topics[t.String()]; ok {
		return false
	}
	s.ch.topics[t.String()] = t
	k := hubKey{s.tenant, t.String()}
	set := h.watch[k]
	if set == nil {
		set = map[*session]struct{}{}
		h.watch[k] = set
	}
	set[s] = struct{}{}
	return true
}

// unwatchLocked stops t's messages reaching s's channel; h.mu is held.
func (h *Hub) unwatchLocked(s *session, t domain.Topic) bool {
	if s.ch == nil {
		return false
	}
	if _, ok := s.ch.topics[t.String()]; !ok {
		return false
	}
	delete(s.ch.topics, t.String())
	k := hubKey{s.tenant, t.String()}
	if set := h.watch[k]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(h.watch, k)
		}
	}
	return true
}

// watched returns the group topics s's channel watches; nil when s is not on its channel.
func (h *Hub) watched(s *session) []domain.Topic {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if s.ch == nil {
		return nil
	}
	out := make([]domain.Topic, 0, len(s.ch.topics))
	for _, t := range s.ch.topics {
		out = append(out, t)
	}
	return out
}

// effect is how an item of a user's channel changes what the user's channel sessions hear:
// joining or leaving a group, a peer's block or unblock.
type effect struct {
	what  string
	topic domain.Topic
	src   domain.UserID
}

// applyEffect applies e to s's channel state; h.mu is held. It reports whether the group
// topics s watches changed (presence must follow).
func (h *Hub) applyEffect(s *session, user domain.UserID, e effect) bool {
	if s.ch == nil || e.topic.IsZero() {
		return false
	}
	switch e.what {
	case userchan.WhatJoined:
		if e.src == user {
			return h.watchLocked(s, e.topic)
		}
	case userchan.WhatLeft, userchan.WhatRemoved:
		if e.src == user {
			return h.unwatchLocked(s, e.topic)
		}
	case userchan.WhatDissolved:
		return h.unwatchLocked(s, e.topic)
	case userchan.WhatBlocked:
		if e.src == user && e.topic.Kind() == domain.TopicDirect {
			s.ch.muted[e.topic.String()] = struct{}{}
		}
	case userchan.WhatUnblocked:
		if e.src == user && e.topic.Kind() == domain.TopicDirect {
			delete(s.ch.muted, e.topic.String())
		}
	}
	return false
}

// reconcile applies logged items, oldest first, to s's channel state: the read models s's state
// was loaded from may trail the last changes, which the log already holds.
func (h *Hub) reconcile(s *session, user domain.UserID, entries []userchan.Entry) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	changed := false
	for _, en := range entries {
		e := effect{what: en.What, src: en.Src}
		if en.Topic != "" {
			t, err := domain.ParseTopic(en.Topic)
			if err != nil {
				continue
			}
			e.topic = t
		}
		if h.applyEffect(s, user, e) {
			changed = true
		}
	}
	return changed
}

// deliverUser writes a user's channel item (a fanout.KindUser message) to the user's channel
// sessions on this node, after applying its effect to their state. When the item changes the
// groups a session watches (a join, a removal), presence is told before the item is written, so
// a client that sees a joined item has its node registered for the group's messages.
func (h *Hub) deliverUser(m *fanout.Message) {
	frame := wireFrame(encodeMe(m.Content))
	e := effect{what: m.What, topic: m.Topic, src: m.Src}
	var to, resync []*session
	h.mu.Lock()
	for s := range h.users[userKey{m.Tenant, m.To}].All() {
		if s.ch == nil {
			continue
		}
		if h.applyEffect(s, m.To, e) {
			resync = append(resync, s)
		}
		to = append(to, s)
	}
	h.mu.Unlock()
	for _, s := range resync {
		s.syncWatchNow()
	}
	for _, s := range to {
		s.sendWire(frame)
	}
}

// deliverChannels writes the channel frame of a committed message or change (d.msg) to the
// channel sessions it concerns that are not subscribed to its topic (those have its data or info
// frame): the watchers of a group topic, the two users of a 1:1 topic unless the peer blocks
// them. The frame is encoded once, for the first of them, and handed to write with each
// session. h.mu is read-locked.
func (h *Hub) deliverChannels(d delivery, write func(s *session, wire []byte)) {
	m := d.msg
	subs := h.topics[d.key]
	var wire []byte
	send := func(s *session) {
		if _, sub := subs[s]; sub || s.ch == nil {
			return
		}
		if wire == nil {
			wire = wireFrame(encodeChannelMessage(m))
		}
		write(s, wire)
	}
	switch m.Topic.Kind() {
	case domain.TopicGroup:
		for s := range h.watch[d.key] {
			send(s)
		}
	case domain.TopicDirect:
		a, b := m.Topic.Parties()
		for _, u := range []domain.UserID{a, b} {
			for s := range h.users[userKey{m.Tenant, u}].All() {
				if s.ch == nil {
					continue
				}
				if _, muted := s.ch.muted[d.key.topic]; !muted {
					send(s)
				}
			}
		}
	}
}

// channelControl applies a control message that ends subscriptions to the channel sessions it
// concerns: a member who left or was removed, every member of a dissolved group, no longer
// watch the group; a user the peer blocked no longer hears the 1:1 topic. The log's item does
// the same when it arrives; this is for the nodes it may reach later. h.mu is held; it returns
// the sessions whose watched topics changed.
func (h *Hub) channelControl(m *fanout.Message) []*session {
	var changed []*session
	switch {
	case m.Drop == fanout.DropAll && m.Topic.Kind() == domain.TopicGroup:
		for s := range h.watch[hubKey{m.Tenant, m.Topic.String()}] {
			if h.unwatchLocked(s, m.Topic) {
				changed = append(changed, s)
			}
		}
	case m.Drop == fanout.DropUser && m.Src != 0:
		what := userchan.WhatRemoved
		if m.Topic.Kind() == domain.TopicDirect {
			what = userchan.WhatBlocked
		}
		for s := range h.users[userKey{m.Tenant, m.Src}].All() {
			if h.applyEffect(s, m.Src, effect{what: what, topic: m.Topic, src: m.Src}) {
				changed = append(changed, s)
			}
		}
	}
	return changed
}

// sendWireAny is sendWire without its result, for deliverChannels.
func (s *session) sendWireAny(wire []byte) { s.sendWire(wire) }

// encodeMe is the frame of a channel item: {"me":<item>}.
func encodeMe(item []byte) []byte {
	b := make([]byte, 0, len(item)+7)
	b = append(b, `{"me":`...)
	b = append(b, item...)
	return append(b, '}')
}

// encodeChannelMessage is the channel frame of a committed message (what "msg": its
// conversation's last message and counters) or of a recall or edit of one:
//
//	{"me":{"what":"msg","topic":"grp7","msg_seq":"12","from":"43","message_id":"…","head":{…},"ts":"…","content":…}}
//	{"me":{"what":"recall","topic":"grp7","msg_seq":"5","from":"42","message_id":"…","ts":"…"}}
//	{"me":{"what":"edit","topic":"grp7","msg_seq":"6","from":"42","message_id":"…","version":"2","ts":"…","content":…}}
//
// These are state, not logged items: they carry no seq of the channel.
func encodeChannelMessage(m *fanout.Message) []byte {
	var b bytes.Buffer
	b.Grow(192 + len(m.Content))
	b.WriteString(`{"me":{"what":`)
	if m.Kind == fanout.KindData {
		b.WriteString(`"msg"`)
	} else {
		writeString(&b, m.What)
	}
	b.WriteString(`,"topic":`)
	writeString(&b, m.Topic.String())
	b.WriteString(`,"msg_seq":"`)
	b.WriteString(strconv.FormatInt(m.Seq, 10))
	b.WriteString(`","from":"`)
	b.WriteString(m.From.String())
	b.WriteString(`"`)
	if m.MessageID != "" {
		b.WriteString(`,"message_id":`)
		writeString(&b, m.MessageID)
	}
	if m.MsgType != "" && m.MsgType != domain.MsgText {
		b.WriteString(`,"msg_type":`)
		writeString(&b, string(m.MsgType))
	}
	if m.Version > 0 {
		b.WriteString(`,"version":"`)
		b.WriteString(strconv.FormatInt(m.Version, 10))
		b.WriteString(`"`)
	}
	if m.Head != nil {
		if h, err := json.Marshal(m.Head); err == nil {
			b.WriteString(`,"head":`)
			b.Write(h)
		}
	}
	b.WriteString(`,"ts":"`)
	b.WriteString(timestamp(m.TS))
	b.WriteString(`"`)
	if len(m.Content) > 0 {
		b.WriteString(`,"content":`)
		b.Write(m.Content)
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

// syncWatchLater makes presence follow the group topics the hub has s's channel watch, in the
// background: the node's channel registrations route other nodes' messages here.
func (s *session) syncWatchLater() {
	if s.pres == nil {
		return
	}
	go s.safely(s.g.life, func() {
		ctx, cancel := context.WithTimeout(s.g.life, s.g.cfg.RequestTimeout)
		defer cancel()
		s.syncWatch(ctx)
	})
}

// syncWatchNow is syncWatchLater on the caller's goroutine, bounded by syncWatchTimeout: a
// registration Redis misses is written by the heartbeat.
func (s *session) syncWatchNow() {
	if s.pres == nil {
		return
	}
	s.safely(s.g.life, func() {
		ctx, cancel := context.WithTimeout(s.g.life, syncWatchTimeout)
		defer cancel()
		s.syncWatch(ctx)
	})
}

// syncWatchTimeout bounds a registration made on a delivery goroutine.
const syncWatchTimeout = time.Second

// syncWatch tells presence the group topics s's channel watches now, adding and removing the
// difference from what it told it last. Calls are serialised, and each one reads the hub's
// latest state, so the last one leaves presence as the hub is whatever order they ran in.
func (s *session) syncWatch(ctx context.Context) {
	if s.pres == nil {
		return
	}
	s.chanSync.Lock()
	defer s.chanSync.Unlock()
	want := s.g.deps.Hub.watched(s)
	wantSet := make(map[string]domain.Topic, len(want))
	for _, t := range want {
		wantSet[t.String()] = t
	}
	var add, drop []domain.Topic
	for name, t := range wantSet {
		if _, ok := s.presWatched[name]; !ok {
			add = append(add, t)
		}
	}
	for name, t := range s.presWatched {
		if _, ok := wantSet[name]; !ok {
			drop = append(drop, t)
		}
	}
	if len(add) > 0 {
		if err := s.pres.Watch(ctx, add); err != nil {
			s.g.log.WarnContext(ctx, "ws: channel registration failed; the heartbeat retries", "tenant_id", s.tenant.String(), "err", err)
		}
	}
	if len(drop) > 0 {
		if err := s.pres.Unwatch(ctx, drop); err != nil {
			s.g.log.WarnContext(ctx, "ws: channel deregistration failed", "tenant_id", s.tenant.String(), "err", err)
		}
	}
	s.presWatched = wantSet
}
