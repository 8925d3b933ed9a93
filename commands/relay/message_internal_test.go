package relay

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
)

// marshalEnvelope must produce the same JSON value as json.Marshal.
func TestMarshalEnvelopeMatchesJSONMarshal(t *testing.T) {
	t.Parallel()
	parent := uuid.Must(uuid.NewV7())
	base := domain.Envelope{
		EventID: uuid.Must(uuid.NewV7()), TenantID: domain.MustTenantID("acme"), EventType: domain.EventGroupMessageSent,
		Version: 1, OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), Actor: domain.Actor{Type: "user", ID: "7"},
		StreamID: "grp1", StreamVersion: 9, Position: 1 << 40,
	}
	full := base
	full.TraceID, full.CorrelationID, full.CausationID, full.ParentEventID = "t", "c", "k", &parent
	full.SourceService, full.TargetService, full.BizType, full.BizID, full.IdempotencyKey = "s", "d", "b", "i", "key"
	tests := []struct {
		name    string
		env     domain.Envelope
		payload string
	}{
		{"object with jsonb spacing", base, `{"seq": "9", "text": "hi \"there\"", "n": [1, 2]}`},
		{"all fields", full, `{"a":1}`},
		{"scalar", base, `"just a string"`},
		{"unicode", base, `{"text": "你好 <b>&</b>"}`},
		{"no payload", base, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := tt.env
			if tt.payload != "" {
				env.Payload = json.RawMessage(tt.payload)
			}
			got, err := marshalEnvelope(env)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(env)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("marshalEnvelope gave invalid JSON %s: %v", got, err)
			}
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("marshalEnvelope = %s\njson.Marshal   = %s", got, want)
			}
		})
	}
}
