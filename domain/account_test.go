package domain_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

func TestNewLogin(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, want, reason string
	}{
		{"alice", "alice", ""},
		{"Alice.B-2_x", "alice.b-2_x", ""},
		{"abc", "abc", ""},
		{strings.Repeat("a", domain.MaxLoginLen), strings.Repeat("a", domain.MaxLoginLen), ""},
		{"", "", "invalid:login:required"},
		{"ab", "", "invalid:login:too_short"},
		{strings.Repeat("a", domain.MaxLoginLen+1), "", "invalid:login:too_long"},
		{"al ice", "", "invalid:login:bad_format"},
		{"alice@example", "", "invalid:login:bad_format"},
		{"ålice", "", "invalid:login:bad_format"},
		{"\u212Aate", "", "invalid:login:bad_format"}, // the Kelvin sign is not a "k"
		{"ali\x00", "", "invalid:login:bad_format"},
	}
	for _, c := range cases {
		l, err := domain.NewLogin(c.in)
		if got := reasonOf(err); got != c.reason {
			t.Errorf("NewLogin(%q): got %q, want %q", c.in, got, c.reason)
			continue
		}
		if l.String() != c.want {
			t.Errorf("NewLogin(%q) = %q, want %q", c.in, l.String(), c.want)
		}
	}
}

func TestRegisterDecidesRegistrationThenProfile(t *testing.T) {
	t.Parallel()
	login, _ := domain.NewLogin("mei")
	profile, _ := domain.NewUserProfile("Mei", "", "hi")
	now := time.Date(2025, 3, 1, 8, 0, 0, 0, time.FixedZone("x", 3600))
	evs, err := domain.Register(tenantA, 42, login, profile, now)
	if err != nil {
		t.Fatal(err)
	}
	envs, err := domain.NewEnvelopes(tenantA, domain.Actor{Type: domain.ActorUser, ID: "42"}, evs)
	if err != nil {
		t.Fatal(err)
	}
	if len(envs) != 2 || envs[0].EventType != domain.EventUserRegistered || envs[1].EventType != domain.EventUserProfileUpdated {
		t.Fatalf("events %+v", envs)
	}
	for i, e := range envs {
		if e.StreamID != domain.ProfileStreamID(42) || e.StreamVersion != int64(i+1) || e.BizType != domain.BizTypeUser {
			t.Errorf("event %d: stream %s@%d biz %s", i, e.StreamID, e.StreamVersion, e.BizType)
		}
	}
	info, ok := domain.LookupEventType(domain.EventUserRegistered)
	if !ok || info.Category != domain.CategoryBusiness {
		t.Fatalf("user.registered.v1 registration %+v %v", info, ok)
	}
	var payload map[string]any
	if err := json.Unmarshal(envs[0].Payload, &payload); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"user": "42", "login": "mei", "registered_at": "2025-03-01T07:00:00Z"}
	if len(payload) != len(want) {
		t.Fatalf("payload %s has other fields than %v", envs[0].Payload, want)
	}
	for k, v := range want {
		if payload[k] != v {
			t.Errorf("payload.%s = %v, want %v", k, payload[k], v)
		}
	}

	only, err := domain.Register(tenantA, 42, login, domain.UserProfile{}, now)
	if err != nil || len(only) != 1 {
		t.Fatalf("without a profile: %v, %d events", err, len(only))
	}
}

func TestRegisterRejects(t *testing.T) {
	t.Parallel()
	login, _ := domain.NewLogin("mei")
	cases := []struct {
		name   string
		tenant domain.TenantID
		user   domain.UserID
		login  domain.Login
		want   string
	}{
		{"no tenant", domain.TenantID{}, 1, login, "invalid:tenant_id:required"},
		{"no user", tenantA, 0, login, "invalid:user_id:bad_format"},
		{"no login", tenantA, 1, domain.Login{}, "invalid:login:required"},
	}
	for _, c := range cases {
		_, err := domain.Register(c.tenant, c.user, c.login, domain.UserProfile{}, time.Now())
		if got := reasonOf(err); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestRegisteredProfileStreamFoldsAndUpdates(t *testing.T) {
	t.Parallel()
	login, _ := domain.NewLogin("mei")
	profile, _ := domain.NewUserProfile("Mei", "", "hi")
	now := time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)
	evs, err := domain.Register(tenantA, 42, login, profile, now)
	if err != nil {
		t.Fatal(err)
	}
	envs, err := domain.NewEnvelopes(tenantA, domain.Actor{Type: domain.ActorUser, ID: "42"}, evs)
	if err != nil {
		t.Fatal(err)
	}
	st, err := domain.FoldProfile(tenantA, 42, envs)
	if err != nil {
		t.Fatalf("fold a registered user's stream: %v", err)
	}
	if st.Version() != 2 || st.Profile().Nickname() != "Mei" {
		t.Fatalf("folded version %d profile %+v", st.Version(), st.Profile())
	}
	renamed, _ := domain.NewUserProfile("Mei Lin", "", "hi")
	next, err := st.Update(domain.Principal{Tenant: tenantA, User: 42}, renamed, now.Add(time.Minute))
	if err != nil || len(next) != 1 || next[0].ExpectedVersion != 2 {
		t.Fatalf("update after registration: %+v %v", next, err)
	}
}
