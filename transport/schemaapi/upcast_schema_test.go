package schemaapi_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/domain/schemas"
	"github.com/imledger/imledger/internal/jsonschema"
)

// v1Muted is a member.muted.v1 event as its writer stored it: a lift has the zero until.
func v1Muted(t *testing.T, until time.Time) domain.Envelope {
	t.Helper()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	g, u, owner := domain.GroupID(10), domain.UserID(2), domain.UserID(1)
	raw, err := json.Marshal(domain.MemberMutedV1{GroupID: g, User: u, Until: until, By: owner, MutedAt: t0})
	if err != nil {
		t.Fatal(err)
	}
	return domain.Envelope{EventID: uuid.Must(uuid.NewV7()), TenantID: domain.MustTenantID("acme"), SourceService: domain.SourceService,
		EventType: domain.EventMemberMutedV1, BizType: domain.BizTypeMember, Version: 1, OccurredAt: t0,
		Actor: domain.Actor{Type: domain.ActorUser, ID: owner.String()}, StreamID: domain.MembershipStreamID(g, u),
		StreamVersion: 1, Payload: raw}
}

// Both versions' checked-in schemas accept what their writers stored: a v1 lift has no until.
func TestSchemasAcceptBothVersionsOfMemberMuted(t *testing.T) {
	t.Parallel()
	load := func(typ domain.EventType) *jsonschema.Schema {
		raw, err := schemas.Read(string(typ) + ".json")
		if err != nil {
			t.Fatal(err)
		}
		s, err := jsonschema.Compile(raw)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	v1, v2 := load(domain.EventMemberMutedV1), load(domain.EventMemberMuted)
	for _, until := range []time.Time{{}, time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC)} {
		old := v1Muted(t, until)
		if err := v1.Validate(old.Payload); err != nil {
			t.Errorf("v1 schema refuses %s: %v", old.Payload, err)
		}
		up, err := domain.Upcast(old)
		if err != nil {
			t.Fatal(err)
		}
		if err := v2.Validate(up.Payload); err != nil {
			t.Errorf("v2 schema refuses %s: %v", up.Payload, err)
		}
	}
	if err := v2.Validate([]byte(`{"group_id":"1","user":"2","by":"3","muted_at":"2026-01-01T00:00:00Z"}`)); err == nil {
		t.Error("the v2 schema accepts a payload that does not say whether it mutes")
	}
}
