package projtest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

// Event builders.

// Actor is the user every built event is recorded for.
var Actor = domain.Actor{Type: domain.ActorUser, ID: "1"}

// GroupTopic is the topic of group id; it panics on a bad id.
func GroupTopic(id int64) domain.Topic {
	t, err := domain.GroupTopic(id)
	if err != nil {
		panic(err)
	}
	return t
}

// SentEvent is the sent event of message seq of topic from from, its content the JSON string text.
func SentEvent(tenant domain.TenantID, topic domain.Topic, seq int64, from domain.UserID, text string) domain.Envelope {
	p := domain.MessageSent{MessageID: fmt.Sprintf("m-%s-%d", topic, seq), Topic: topic.String(), Seq: seq, From: from,
		ClientMsgID: fmt.Sprintf("c%d-%d", from, seq), MsgType: domain.MsgText, Content: MustJSON(text), SentAt: time.Now().UTC()}
	if topic.Kind() == domain.TopicGroup {
		p.GroupID = topic.GroupID()
	}
	return MustEnvelope(tenant, topic.String(), seq, domain.SentEventType(topic.Kind()), p)
}

// RecallEvent is the recall by by of message seq of topic, at opVersion of the message's ops stream.
func RecallEvent(tenant domain.TenantID, topic domain.Topic, seq int64, by domain.UserID, opVersion int64) domain.Envelope {
	return MustEnvelope(tenant, domain.MessageOpsStreamID(topic, seq), opVersion, domain.MessageEventType(topic.Kind(), domain.ActionRecalled),
		domain.MessageRecalled{Topic: topic.String(), Seq: seq, MessageID: fmt.Sprintf("m-%s-%d", topic, seq), By: by, RecalledAt: time.Now().UTC()})
}

// EditEvent is the edit by by of message seq of topic to text, its editVersion-th version.
func EditEvent(tenant domain.TenantID, topic domain.Topic, seq int64, by domain.UserID, editVersion int64, text string) domain.Envelope {
	return MustEnvelope(tenant, domain.MessageOpsStreamID(topic, seq), editVersion-1, domain.MessageEventType(topic.Kind(), domain.ActionEdited),
		domain.MessageEdited{Topic: topic.String(), Seq: seq, MessageID: fmt.Sprintf("m-%s-%d", topic, seq), By: by,
			EditVersion: editVersion, Content: MustJSON(text), EditedAt: time.Now().UTC()})
}

// MustJSON is v marshalled; it panics when v does not marshal.
func MustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// MustEnvelope is an envelope of tenant at version of stream; it panics when it cannot be built.
func MustEnvelope(tenant domain.TenantID, stream string, version int64, typ domain.EventType, payload any) domain.Envelope {
	e, err := domain.NewEnvelope(tenant, stream, version, typ, Actor, payload)
	if err != nil {
		panic(err)
	}
	return e
}

// ReadMark is user's read mark of topic at seq, at version of the user's read-mark stream.
func ReadMark(tenant domain.TenantID, topic domain.Topic, user domain.UserID, seq, version int64) domain.Envelope {
	return MustEnvelope(tenant, domain.ReadMarksStreamID(topic, user), version, domain.MessageEventType(topic.Kind(), domain.ActionReadMarked),
		domain.ReadMarked{Topic: topic.String(), User: user, ReadSeq: seq, RecvSeq: seq, At: time.Now().UTC()})
}

// SessionEvent is the opening (open) or the closing of user's realtime session sid at at.
func SessionEvent(tenant domain.TenantID, user domain.UserID, sid string, open bool, at time.Time) domain.Envelope {
	if open {
		return MustEnvelope(tenant, domain.SessionStreamID(user, sid), 1, domain.EventSessionOpened,
			domain.SessionOpened{User: user, SessionID: sid, Node: "node-a", UserAgent: "test", OpenedAt: at})
	}
	return MustEnvelope(tenant, domain.SessionStreamID(user, sid), 2, domain.EventSessionClosed,
		domain.SessionClosed{User: user, SessionID: sid, Node: "node-a", Reason: "client_closed", ClosedAt: at})
}

// GroupHistory decides a group's creation and joins with the domain aggregates, as the command
// handlers do, and returns the envelopes in commit order.
func GroupHistory(t *testing.T, tenant domain.TenantID, gid domain.GroupID, owner domain.UserID, joiners []domain.UserID) []domain.Envelope {
	t.Helper()
	now := time.Now().UTC()
	var all []domain.Envelope
	apply := func(pending []domain.PendingEvent, actor domain.UserID, g *domain.GroupState, m *domain.MembershipState) {
		envs, err := domain.NewEnvelopes(tenant, domain.Actor{Type: domain.ActorUser, ID: actor.String()}, pending)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range envs {
			switch {
			case e.StreamID == g.StreamID():
				if err := g.Apply(e); err != nil {
					t.Fatal(err)
				}
			case m != nil && e.StreamID == m.StreamID():
				if err := m.Apply(e); err != nil {
					t.Fatal(err)
				}
			}
		}
		all = append(all, envs...)
	}
	g, _ := domain.NewGroupState(tenant, gid)
	profile, _ := domain.NewGroupProfile("team", "", "")
	created, err := g.Create(domain.Principal{Tenant: tenant, User: owner}, profile, domain.DefaultGroupSettings(), now)
	if err != nil {
		t.Fatal(err)
	}
	apply(created, owner, &g, nil)
	for _, u := range joiners {
		m, _ := domain.NewMembershipState(tenant, gid, u)
		joined, err := g.Join(domain.Principal{Tenant: tenant, User: u}, m, 0, now)
		if err != nil {
			t.Fatal(err)
		}
		apply(joined, u, &g, &m)
	}
	return all
}

// MuteHistory decides, with the domain aggregates and a fixed clock, a group with three members
// of which one is muted and unmuted and another muted until later. With asV1 the mutes are
// stored as builds before member.muted.v2 stored them.
func MuteHistory(t *testing.T, tenant domain.TenantID, now time.Time, asV1 bool) []domain.Envelope {
	t.Helper()
	const gid = domain.GroupID(77)
	owner := domain.UserID(1)
	g, _ := domain.NewGroupState(tenant, gid)
	ms := map[domain.UserID]*domain.MembershipState{}
	member := func(u domain.UserID) *domain.MembershipState {
		if m, ok := ms[u]; ok {
			return m
		}
		m, _ := domain.NewMembershipState(tenant, gid, u)
		ms[u] = &m
		return &m
	}
	var all []domain.Envelope
	commit := func(pending []domain.PendingEvent, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		envs, err := domain.NewEnvelopes(tenant, domain.Actor{Type: domain.ActorUser, ID: "1"}, pending)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range envs {
			if asV1 && e.EventType == domain.EventMemberMuted {
				var p domain.MemberMuted
				if err := e.Decode(&p); err != nil {
					t.Fatal(err)
				}
				e.EventType, e.Version = domain.EventMemberMutedV1, 1
				e.Payload, _ = json.Marshal(domain.MemberMutedV1{GroupID: p.GroupID, User: p.User, Until: p.Until, By: p.By, MutedAt: p.MutedAt})
			}
			if e.StreamID == g.StreamID() {
				if err := g.Apply(e); err != nil {
					t.Fatal(err)
				}
			}
			for _, m := range ms {
				if e.StreamID == m.StreamID() {
					if err := m.Apply(e); err != nil {
						t.Fatal(err)
					}
				}
			}
			all = append(all, e)
		}
	}
	p := func(u domain.UserID) domain.Principal { return domain.Principal{Tenant: tenant, User: u} }
	profile, _ := domain.NewGroupProfile("muted", "", "")
	member(owner)
	commit(g.Create(p(owner), profile, domain.DefaultGroupSettings(), now))
	for _, u := range []domain.UserID{2, 3, 4} {
		commit(g.Join(p(u), *member(u), 0, now))
	}
	commit(g.Mute(p(owner), *member(owner), *member(3), now.Add(time.Hour), now))
	commit(g.Mute(p(owner), *member(owner), *member(3), time.Time{}, now.Add(time.Minute)))
	commit(g.Mute(p(owner), *member(owner), *member(4), now.Add(2*time.Hour), now.Add(time.Minute)))
	if !member(4).MutedAt(now.Add(90*time.Minute)) || member(3).MutedAt(now.Add(2*time.Minute)) {
		t.Fatalf("the decided history does not mute 4 and lift 3 (v1: %v)", asV1)
	}
	return all
}

// IDs are the event ids of envs, in order.
func IDs(envs ...domain.Envelope) []string {
	out := make([]string, len(envs))
	for i, e := range envs {
		out[i] = e.EventID.String()
	}
	return out
}

// DeletionEvent is the deletion for user of message seq of topic, at version of the user's deletions stream.
func DeletionEvent(tenant domain.TenantID, topic domain.Topic, seq int64, user domain.UserID, version int64) domain.Envelope {
	return MustEnvelope(tenant, domain.DeletionsStreamID(topic, user), version, domain.MessageEventType(topic.Kind(), domain.ActionDeleted),
		domain.MessageDeletedForUser{Topic: topic.String(), Seq: seq, User: user, DeletedAt: time.Now().UTC()})
}
