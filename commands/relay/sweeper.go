package relay

import (
	"container/list"
	"time"

	"github.com/imledger/imledger/commands/eventstore"
	"github.com/imledger/imledger/domain"
)

// The gap sweeper. The relay is the one process that reads every event in commit order, so it
// sees when a conversation's seq N+1 is committed while N is not. Such a gap still open after
// Config.GapDeadline gets a seq-skip marker at N (eventstore.AppendSkipsFenced): the send that
// holds N has failed or its node died, and if it commits after all it loses to the marker on the
// stream's unique key and gets a new seq. Holes become final, and readers can publish a
// watermark.

// convKey names a conversation stream.
type convKey struct {
	tenant domain.TenantID
	topic  domain.Topic
}

// gap is a run of missing seqs [from, to] of one conversation.
type gap struct {
	from, to int64
	due      time.Time // when markers are appended if the run is still missing
}

// convState is what the sweeper knows of one conversation.
type convState struct {
	key  convKey
	high int64 // highest seq seen
	gaps []gap // ascending, disjoint, all below high
}

// sweeper tracks the conversations the relay publishes, at most max of them (least recently
// seen out first). It is used from the relay's tail goroutine only.
type sweeper struct {
	deadline time.Duration
	max      int
	lookback int64
	maxSkips int
	order    *list.List // of *convState, most recently seen first
	byKey    map[convKey]*list.Element
	holed    map[convKey]*convState // the tracked conversations with gaps
	missing  int64                  // seqs in all gaps
}

func newSweeper(cfg Config) *sweeper {
	return &sweeper{deadline: cfg.GapDeadline, max: cfg.GapStreams, lookback: int64(cfg.GapLookback),
		maxSkips: cfg.GapMaxSkips, order: list.New(), byKey: map[convKey]*list.Element{},
		holed: map[convKey]*convState{}}
}

// seqEvent is one conversation seq (a sent message or a marker) from a published batch.
type seqEvent struct {
	key convKey
	seq int64
}

// seqEvents picks the conversation seqs out of recs.
func seqEvents(recs []eventstore.Record) []seqEvent {
	var out []seqEvent
	for _, rec := range recs {
		e := rec.Envelope
		if !domain.IsConversationSeqEvent(e.EventType) || e.StreamVersion <= 0 {
			continue
		}
		topic, err := domain.ParseTopic(e.StreamID)
		if err != nil || topic.String() != e.StreamID {
			continue
		}
		out = append(out, seqEvent{key: convKey{tenant: e.TenantID, topic: topic}, seq: e.StreamVersion})
	}
	return out
}

// unknown returns, for the conversations of evs the sweeper does not track, a probe of the seqs
// below the first one seen, so their earlier holes can be looked up in the store.
func (s *sweeper) unknown(evs []seqEvent) ([]convKey, []eventstore.StreamProbe) {
	first := map[convKey]int{}
	var keys []convKey
	var probes []eventstore.StreamProbe
	for _, ev := range evs {
		if _, ok := s.byKey[ev.key]; ok {
			continue
		}
		if i, ok := first[ev.key]; ok {
			probes[i].Below = min(probes[i].Below, ev.seq)
			continue
		}
		first[ev.key] = len(probes)
		keys = append(keys, ev.key)
		probes = append(probes, eventstore.StreamProbe{Tenant: ev.key.tenant, StreamID: ev.key.topic.String(), Below: ev.seq})
	}
	return keys, probes
}

// learn starts tracking key below whose seq below the store lacks the seqs in missing.
func (s *sweeper) learn(key convKey, below int64, missing []eventstore.VersionRange, now time.Time) {
	st := &convState{key: key, high: below - 1}
	for _, m := range missing {
		s.addGap(st, gap{from: m.From, to: m.To, due: now.Add(s.deadline)})
	}
	s.byKey[st.key] = s.order.PushFront(st)
	for s.order.Len() > s.max {
		old := s.order.Back()
		s.order.Remove(old)
		ost := old.Value.(*convState)
		delete(s.byKey, ost.key)
		s.fill(ost, 1, ost.high) // forgotten; the store is asked again if it comes back
	}
}

func (s *sweeper) addGap(st *convState, g gap) {
	st.gaps = append(st.gaps, g)
	s.missing += g.to - g.from + 1
	s.holed[st.key] = st
}

// observe records published seqs in order. A seq beyond the highest seen opens a gap for the
// seqs between; a seq inside a gap closes it there.
func (s *sweeper) observe(evs []seqEvent, now time.Time) {
	for _, ev := range evs {
		el, ok := s.byKey[ev.key]
		if !ok {
			s.learn(ev.key, ev.seq, nil, now)
			el = s.byKey[ev.key]
		}
		s.order.MoveToFront(el)
		st := el.Value.(*convState)
		switch {
		case ev.seq > st.high+1:
			s.addGap(st, gap{from: st.high + 1, to: ev.seq - 1, due: now.Add(s.deadline)})
			st.high = ev.seq
		case ev.seq == st.high+1:
			st.high = ev.seq
		default:
			s.fill(st, ev.seq, ev.seq)
		}
	}
}

// fill removes the seqs [from, to] from st's gaps.
func (s *sweeper) fill(st *convState, from, to int64) {
	if len(st.gaps) == 0 {
		return
	}
	out := st.gaps[:0:0]
	for _, g := range st.gaps {
		if to < g.from || from > g.to {
			out = append(out, g)
			continue
		}
		s.missing -= min(g.to, to) - max(g.from, from) + 1
		if g.from < from {
			out = append(out, gap{from: g.from, to: from - 1, due: g.due})
		}
		if g.to > to {
			out = append(out, gap{from: to + 1, to: g.to, due: g.due})
		}
	}
	st.gaps = out
	if len(out) == 0 {
		delete(s.holed, st.key)
	}
}

// due returns skips for the missing seqs whose deadline has passed, at most maxSkips of them.
func (s *sweeper) due(now time.Time, actor domain.Actor) []eventstore.Skip {
	var out []eventstore.Skip
	for _, st := range s.holed {
		if len(out) >= s.maxSkips {
			break
		}
		for _, g := range st.gaps {
			if g.due.After(now) {
				continue
			}
			for seq := g.from; seq <= g.to && len(out) < s.maxSkips; seq++ {
				out = append(out, eventstore.Skip{Tenant: st.key.tenant, Topic: st.key.topic, Seq: seq,
					Reason: domain.SkipGapTimeout, Actor: actor})
			}
		}
	}
	return out
}

// settled forgets the seqs of skips: each now holds a marker or, if the marker lost, a message.
func (s *sweeper) settled(skips []eventstore.Skip) {
	for _, sk := range skips {
		if st, ok := s.holed[convKey{tenant: sk.Tenant, topic: sk.Topic}]; ok {
			s.fill(st, sk.Seq, sk.Seq)
		}
	}
}
