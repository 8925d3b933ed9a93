package domain_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
)

// v1Muted builds a member.muted.v1 event as builds before v2 stored it.
func v1Muted(t *testing.T, g domain.GroupID, u domain.UserID, version int64, until time.Time) domain.Envelope {
	t.Helper()
	p := domain.MemberMutedV1{GroupID: g, User: u, Until: until, By: uOwner, MutedAt: t0}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return domain.Envelope{EventID: uuid.Must(uuid.NewV7()), TenantID: tenantA, SourceService: domain.SourceService,
		EventType: domain.EventMemberMutedV1, BizType: domain.BizTypeMember, Version: 1, OccurredAt: t0,
		Actor: domain.Actor{Type: domain.ActorUser, ID: uOwner.String()}, StreamID: domain.MembershipStreamID(g, u),
		StreamVersion: version, Payload: raw}
}

func TestUpcastMemberMutedV1(t *testing.T) {
	t.Parallel()
	until := t0.Add(time.Hour)
	for _, c := range []struct {
		name  string
		until time.Time
		muted bool
	}{{"mute", until, true}, {"lift", time.Time{}, false}} {
		old := v1Muted(t, groupID, uMember, 3, c.until)
		got, err := domain.Upcast(old)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.EventType != domain.EventMemberMuted || got.Version != 2 {
			t.Errorf("%s: upcast to %s version %d, want %s version 2", c.name, got.EventType, got.Version, domain.EventMemberMuted)
		}
		if got.EventID != old.EventID || got.StreamID != old.StreamID || got.StreamVersion != 3 || !got.OccurredAt.Equal(t0) {
			t.Errorf("%s: upcasting changed the envelope: %+v", c.name, got)
		}
		var p domain.MemberMuted
		if err := json.Unmarshal(got.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.Muted != c.muted || !p.Until.Equal(c.until) || p.User != uMember || p.By != uOwner || !p.MutedAt.Equal(t0) {
			t.Errorf("%s: upcast payload %+v", c.name, p)
		}
		again, err := domain.Upcast(got)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("%s: upcasting a current event changed it: %v", c.name, err)
		}
	}
	if got, err := domain.Upcast(domain.Envelope{EventType: domain.EventMemberMutedV1, Payload: []byte(`{"until":7}`)}); err == nil {
		t.Errorf("a v1 payload that does not decode upcast to %s", got.Payload)
	} else if reasonOf(err) != "invalid:payload:bad_event" {
		t.Errorf("bad v1 payload: %v, want a bad_event validation error", err)
	}
}

// The upcast of a v1 event is exactly what today's writer stores for the same decision, so a read
// model folded from a mix of versions equals one folded from v2 only.
func TestUpcastEqualsWhatTheWriterEmits(t *testing.T) {
	t.Parallel()
	for _, lift := range []bool{false, true} {
		w := newGroupWorld(t)
		until := time.Time{}
		target := uMuted
		if !lift {
			until, target = t0.Add(2*time.Hour), uMember
		}
		decided, err := w.g.Mute(as(uOwner), w.m(t, uOwner), w.m(t, target), until, t0)
		if err != nil || len(decided) != 1 {
			t.Fatalf("mute decision: %v %v", decided, err)
		}
		envs, err := domain.NewEnvelopes(tenantA, domain.Actor{Type: domain.ActorUser, ID: uOwner.String()}, decided)
		if err != nil {
			t.Fatal(err)
		}
		v2 := envs[0]
		if v2.EventType != domain.EventMemberMuted || v2.Version != 2 {
			t.Fatalf("the writer emits %s version %d, want member.muted.v2", v2.EventType, v2.Version)
		}
		old := v1Muted(t, groupID, target, v2.StreamVersion, until)
		up, err := domain.Upcast(old)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		_ = json.Unmarshal(up.Payload, &a)
		_ = json.Unmarshal(v2.Payload, &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("lift=%v: upcast payload %s, writer's %s", lift, up.Payload, v2.Payload)
		}

		// Folding the v1 event gives the state the v2 event gives.
		m1, m2 := w.m(t, target), w.m(t, target)
		if err := m1.Apply(old); err != nil {
			t.Fatalf("fold v1: %v", err)
		}
		if err := m2.Apply(v2); err != nil {
			t.Fatalf("fold v2: %v", err)
		}
		if !m1.MutedUntil().Equal(m2.MutedUntil()) || m1.Version() != m2.Version() {
			t.Errorf("lift=%v: v1 folds to muted until %v, v2 to %v", lift, m1.MutedUntil(), m2.MutedUntil())
		}
		if lift && !m1.MutedUntil().IsZero() {
			t.Errorf("a v1 lift left the member muted until %v", m1.MutedUntil())
		}
	}
}

func TestUpcastRegistry(t *testing.T) {
	t.Parallel()
	if got := domain.CurrentType(domain.EventMemberMutedV1); got != domain.EventMemberMuted {
		t.Errorf("CurrentType(v1) = %s", got)
	}
	if !domain.IsSuperseded(domain.EventMemberMutedV1) || domain.IsSuperseded(domain.EventMemberMuted) {
		t.Error("IsSuperseded is wrong for member.muted")
	}
	want := []domain.EventType{domain.EventMemberMutedV1, domain.EventMemberMuted}
	for _, typ := range want {
		if got := domain.Versions(typ); !reflect.DeepEqual(got, want) {
			t.Errorf("Versions(%s) = %v, want %v", typ, got, want)
		}
	}
	if got := domain.Versions(domain.EventMemberLeft); !reflect.DeepEqual(got, []domain.EventType{domain.EventMemberLeft}) {
		t.Errorf("Versions(member.left.v1) = %v", got)
	}
	for _, typ := range []domain.EventType{"nope.v1", domain.EventMemberLeft} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("an upcaster from %s to an unregistered type was accepted", typ)
				}
			}()
			domain.IndexUpcasters([]domain.Upcaster{{From: typ, To: "nope.v2", Fn: func(domain.Envelope) (json.RawMessage, error) { return nil, nil }}})
		}()
	}
}

// Every registered type's name ends in its schema version, and every superseded type upcasts
// within its category.
func TestEventTypeNamesCarryTheirVersion(t *testing.T) {
	t.Parallel()
	for _, info := range domain.EventTypes() {
		if !strings.HasSuffix(string(info.Type), ".v"+strconv.Itoa(info.SchemaVersion)) {
			t.Errorf("%s: schema version %d", info.Type, info.SchemaVersion)
		}
		cur, _ := domain.LookupEventType(domain.CurrentType(info.Type))
		if cur.Category != info.Category {
			t.Errorf("%s upcasts to %s of another category", info.Type, cur.Type)
		}
	}
}

func TestWritersCannotEmitSupersededVersions(t *testing.T) {
	t.Parallel()
	_, err := domain.NewEnvelope(tenantA, domain.MembershipStreamID(groupID, uMember), 1, domain.EventMemberMutedV1,
		domain.Actor{Type: domain.ActorUser, ID: "1"}, domain.MemberMutedV1{GroupID: groupID, User: uMember})
	if reasonOf(err) != "invalid:event_type:superseded" {
		t.Fatalf("NewEnvelope(member.muted.v1) = %v, want a superseded refusal", err)
	}
}
