package domain_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/imledger/imledger/domain"
)

func TestApplyTenantSettings(t *testing.T) {
	t.Parallel()
	s, err := domain.ApplyTenantSettings(domain.TenantSettings{}, map[string]json.RawMessage{
		"registration_open": json.RawMessage(`false`), "max_content_bytes": json.RawMessage(`1024`)})
	if err != nil || s.Registration() || s.ContentLimit(65536) != 1024 {
		t.Fatalf("set: %+v %v", s, err)
	}
	if got := s.ContentLimit(512); got != 512 {
		t.Errorf("the node's lower limit is the ceiling: got %d", got)
	}
	s, err = domain.ApplyTenantSettings(s, map[string]json.RawMessage{"max_content_bytes": json.RawMessage(`null`)})
	if err != nil || s.MaxContentBytes != nil || s.Registration() {
		t.Fatalf("unset one key: %+v %v", s, err)
	}
	for name, changes := range map[string]map[string]json.RawMessage{
		"unknown key":  {"colour": json.RawMessage(`"red"`)},
		"zero limit":   {"max_content_bytes": json.RawMessage(`0`)},
		"huge limit":   {"max_content_bytes": json.RawMessage(`99999999`)},
		"not a bool":   {"registration_open": json.RawMessage(`"yes"`)},
		"nothing":      {},
		"string limit": {"max_content_bytes": json.RawMessage(`"10"`)},
	} {
		if _, err := domain.ApplyTenantSettings(domain.TenantSettings{}, changes); !errors.Is(err, domain.ErrInvalid) {
			t.Errorf("%s: want a validation error, got %v", name, err)
		}
	}
}

// fold applies the decided events to s as the store would number them.
func foldTenant(t *testing.T, s *domain.TenantState, events []domain.PendingEvent) {
	t.Helper()
	envs, err := domain.NewEnvelopes(s.Tenant(), domain.Actor{Type: domain.ActorAdmin, ID: "ops"}, events)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range envs {
		if err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTenantLifecycle(t *testing.T) {
	t.Parallel()
	s, _ := domain.NewTenantState(domain.MustTenantID("acme"))
	if _, err := s.Suspend("", time.Now()); !isDenied(err, domain.ReasonTenantNotFound) {
		t.Fatalf("suspend before provisioning: %v", err)
	}
	foldTenant(t, &s, s.Provision(domain.TenantSettings{}, time.Now()))
	if !s.Exists() || s.Status() != domain.TenantStatusActive || s.Provision(domain.TenantSettings{}, time.Now()) != nil {
		t.Fatalf("after provision: %+v", s)
	}
	at := time.Now().Add(-time.Minute)
	ev, err := s.Suspend("unpaid", at)
	if err != nil {
		t.Fatal(err)
	}
	foldTenant(t, &s, ev)
	if s.Status() != domain.TenantStatusSuspended || !s.NotBefore().Equal(at.UTC()) {
		t.Fatalf("after suspend: %v %v", s.Status(), s.NotBefore())
	}
	if ev, _ := s.Suspend("again", time.Now()); ev != nil {
		t.Error("suspending a suspended tenant decided events")
	}
	ev, _ = s.Resume(time.Now())
	foldTenant(t, &s, ev)
	if s.Status() != domain.TenantStatusActive || s.NotBefore().IsZero() {
		t.Fatalf("after resume the suspension's not-before stays: %v %v", s.Status(), s.NotBefore())
	}
	ev, err = s.SetConfig(map[string]json.RawMessage{"max_content_bytes": json.RawMessage(`10`)}, time.Now())
	if err != nil || len(ev) != 1 {
		t.Fatal(ev, err)
	}
	foldTenant(t, &s, ev)
	if ev, _ := s.SetConfig(map[string]json.RawMessage{"max_content_bytes": json.RawMessage(`10`)}, time.Now()); ev != nil {
		t.Error("an unchanged setting decided events")
	}
}

func TestAccountState(t *testing.T) {
	t.Parallel()
	tenant := domain.MustTenantID("acme")
	s, _ := domain.NewAccountState(tenant, 42)
	apply := func(events []domain.PendingEvent, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		envs, err := domain.NewEnvelopes(tenant, domain.Actor{Type: domain.ActorAdmin, ID: "ops"}, events)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range envs {
			if err := s.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	banAt := time.Now()
	apply(s.Ban("spam", banAt))
	if !s.Banned() || !s.NotBefore().Equal(banAt.UTC()) {
		t.Fatalf("after ban: %v %v", s.Banned(), s.NotBefore())
	}
	if ev, _ := s.Ban("again", time.Now()); ev != nil {
		t.Error("banning a banned user decided events")
	}
	apply(s.Unban("", time.Now()))
	if s.Banned() || !s.NotBefore().Equal(banAt.UTC()) {
		t.Fatalf("an unban keeps the ban's not-before: %v %v", s.Banned(), s.NotBefore())
	}
	later := banAt.Add(time.Hour)
	apply(s.RevokeTokens("", later))
	apply(s.Kick("", later.Add(time.Hour)))
	if !s.NotBefore().Equal(later.UTC()) || s.Version() != 4 {
		t.Fatalf("revoke moves not-before, kick does not: %v v%d", s.NotBefore(), s.Version())
	}
	if _, err := s.Ban(string(make([]byte, domain.MaxReasonLen+1)), time.Now()); !errors.Is(err, domain.ErrInvalid) {
		t.Errorf("a reason with control characters or too long: %v", err)
	}
}

func isDenied(err error, reason string) bool {
	var d *domain.DeniedError
	return errors.As(err, &d) && d.Reason == reason
}
