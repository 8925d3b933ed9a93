package domain_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

var (
	t0      = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tenantA = domain.MustTenantID("acme")
	tenantB = domain.MustTenantID("globex")
)

// aggregate is what the business states share: a stream to fold events into.
type aggregate interface {
	Apply(domain.Envelope) error
	StreamID() string
	Version() int64
}

// toWire sends envelopes through JSON as the relay and Kafka carry them.
func toWire(t *testing.T, envs []domain.Envelope) []domain.Envelope {
	t.Helper()
	out := make([]domain.Envelope, len(envs))
	for i, e := range envs {
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("marshal %s: %v", e.EventType, err)
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatalf("unmarshal %s: %v", e.EventType, err)
		}
	}
	return out
}

// commit turns a decision into envelopes, sends them over the wire and applies each to the state
// owning its stream, like a command handler followed by a reload would. It returns the envelopes.
func commit(t *testing.T, tenant domain.TenantID, decided []domain.PendingEvent, err error, states ...aggregate) []domain.Envelope {
	t.Helper()
	if err != nil {
		t.Fatalf("decision refused: %v", err)
	}
	envs, err := domain.NewEnvelopes(tenant, domain.Actor{Type: domain.ActorUser, ID: "test"}, decided)
	if err != nil {
		t.Fatalf("NewEnvelopes: %v", err)
	}
	envs = toWire(t, envs)
	for _, e := range envs {
		applied := false
		for _, s := range states {
			if s.StreamID() == e.StreamID {
				if err := s.Apply(e); err != nil {
					t.Fatalf("apply %s to %s: %v", e.EventType, e.StreamID, err)
				}
				applied = true
			}
		}
		if !applied {
			t.Fatalf("no state for stream %s (%s)", e.StreamID, e.EventType)
		}
	}
	return envs
}

func types(evs []domain.PendingEvent) []domain.EventType {
	out := make([]domain.EventType, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// reasonOf returns "" for nil, the stable reason of a *DeniedError, "not_found" for ErrNotFound
// and "invalid:<field>:<reason>" for a *ValidationError.
func reasonOf(err error) string {
	var d *domain.DeniedError
	var v *domain.ValidationError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &d):
		return d.Reason
	case errors.As(err, &v):
		return "invalid:" + v.Field + ":" + v.Reason
	case errors.Is(err, domain.ErrNotFound):
		return "not_found"
	}
	return "unexpected:" + err.Error()
}

// assertBusinessEvents checks that each type is registered as a versioned business event.
func assertBusinessEvents(t *testing.T, all ...domain.EventType) {
	t.Helper()
	for _, typ := range all {
		info, ok := domain.LookupEventType(typ)
		if !ok {
			t.Errorf("%s not registered", typ)
			continue
		}
		if info.Category != domain.CategoryBusiness || info.SchemaVersion < 1 || info.BizType == "" {
			t.Errorf("%s: category %s, schema version %d, biz type %q", typ, info.Category, info.SchemaVersion, info.BizType)
		}
		if !strings.HasSuffix(string(typ), ".v"+strconv.Itoa(info.SchemaVersion)) {
			t.Errorf("%s: name does not end in its schema version %d", typ, info.SchemaVersion)
		}
		if info.Payload() == nil {
			t.Errorf("%s: nil payload", typ)
		}
	}
}

func TestGroupEventTypesAreRegistered(t *testing.T) {
	t.Parallel()
	assertBusinessEvents(t,
		domain.EventGroupCreated, domain.EventGroupProfileUpdated, domain.EventGroupSettingsUpdated,
		domain.EventGroupAnnouncementUpdated, domain.EventGroupOwnershipTransferred, domain.EventGroupDissolved,
		domain.EventGroupMemberCountChanged, domain.EventMemberInvited, domain.EventMemberJoinRequested,
		domain.EventMemberJoinApproved, domain.EventMemberJoinRejected, domain.EventMemberJoined,
		domain.EventMemberLeft, domain.EventMemberRemoved, domain.EventMemberUnbanned, domain.EventMemberRoleSet,
		domain.EventMemberMuted)
}

func TestStreamIDs(t *testing.T) {
	t.Parallel()
	if got := domain.GroupStreamID(42); got != "group:42" {
		t.Errorf("GroupStreamID = %q", got)
	}
	if got := domain.MembershipStreamID(42, 7); got != "member:42:7" {
		t.Errorf("MembershipStreamID = %q", got)
	}
	for _, s := range []string{domain.GroupStreamID(42), domain.MembershipStreamID(42, 7)} {
		if domain.ConversationKey(s) != s {
			t.Errorf("ConversationKey(%q) splits a business stream", s)
		}
	}
}

func TestNewEnvelopesNumbersEachStream(t *testing.T) {
	t.Parallel()
	g, _ := domain.NewGroupState(tenantA, 5)
	evs := []domain.PendingEvent{
		{StreamID: "member:5:1", ExpectedVersion: 3, Type: domain.EventMemberJoinApproved, Payload: &domain.MemberJoinApproved{}},
		{StreamID: "member:5:1", ExpectedVersion: 3, Type: domain.EventMemberJoined, Payload: &domain.MemberJoined{}},
		{StreamID: g.StreamID(), ExpectedVersion: 10, Type: domain.EventGroupMemberCountChanged, Payload: &domain.GroupMemberCountChanged{}},
	}
	envs, err := domain.NewEnvelopes(tenantA, domain.Actor{Type: domain.ActorUser, ID: "1"}, evs)
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{4, 5, 11}
	for i, e := range envs {
		if e.StreamVersion != want[i] || e.BizType == "" || e.TenantID != tenantA {
			t.Errorf("envelope %d: version %d biz %q tenant %s", i, e.StreamVersion, e.BizType, e.TenantID)
		}
	}
	evs[1].ExpectedVersion = 4
	if _, err := domain.NewEnvelopes(tenantA, domain.Actor{}, evs); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("two expected versions for one stream: err = %v", err)
	}
	if _, err := domain.NewEnvelopes(tenantA, domain.Actor{}, []domain.PendingEvent{{StreamID: "x", Type: "no.such.v1"}}); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("unknown type: err = %v", err)
	}
}

func TestPayloadIDsAreJSONStrings(t *testing.T) {
	t.Parallel()
	g, _ := domain.NewGroupState(tenantA, 9007199254740993) // above 2^53: unsafe as a JSON number
	profile, _ := domain.NewGroupProfile("ops", "", "")
	evs, err := g.Create(domain.Principal{Tenant: tenantA, User: 9007199254740995}, profile, domain.DefaultGroupSettings(), t0)
	if err != nil {
		t.Fatal(err)
	}
	envs, err := domain.NewEnvelopes(tenantA, domain.Actor{}, evs)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"group_id":"9007199254740993"`, `"owner":"9007199254740995"`} {
		if !strings.Contains(string(envs[0].Payload), want) {
			t.Errorf("group.created payload %s lacks %s", envs[0].Payload, want)
		}
	}
	if !strings.Contains(string(envs[1].Payload), `"user":"9007199254740995"`) {
		t.Errorf("member.joined payload %s lacks the user as a string", envs[1].Payload)
	}
}

func TestApplyRefusesEventsThatDoNotFit(t *testing.T) {
	t.Parallel()
	g, _ := domain.NewGroupState(tenantA, 5)
	profile, _ := domain.NewGroupProfile("ops", "", "")
	evs, err := g.Create(domain.Principal{Tenant: tenantA, User: 1}, profile, domain.DefaultGroupSettings(), t0)
	if err != nil {
		t.Fatal(err)
	}
	envs, _ := domain.NewEnvelopes(tenantA, domain.Actor{}, evs)
	created, joined := envs[0], envs[1]

	otherTenant := created
	otherTenant.TenantID = tenantB
	gap := created
	gap.StreamVersion = 2
	wrongStream := joined // a membership event on the group stream id is still the wrong stream
	wrongType := joined
	wrongType.StreamID = g.StreamID()
	badJSON := created
	badJSON.Payload = json.RawMessage(`{"group_id":123}`)
	unknown := created
	unknown.EventType = "group.unknown.v1"

	cases := map[string]domain.Envelope{"other tenant": otherTenant, "version gap": gap,
		"other stream": wrongStream, "wrong type": wrongType, "unknown type": unknown}
	for name, env := range cases {
		s := g
		if err := s.Apply(env); !errors.Is(err, domain.ErrStreamMismatch) {
			t.Errorf("%s: err = %v, want ErrStreamMismatch", name, err)
		}
		if s != g {
			t.Errorf("%s: state changed by a refused event", name)
		}
	}
	s := g
	if err := s.Apply(badJSON); err == nil {
		t.Errorf("numeric group id accepted")
	}
}
