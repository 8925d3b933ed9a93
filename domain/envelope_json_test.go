package domain_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/imledger/imledger/domain"
)

// AppendJSON writes what encoding/json writes for an envelope.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	parent := uuid.Must(uuid.NewV7())
	for _, s := range []string{"plain", "", "quote\" backslash\\ <b>&amp;</b>", "tab\tnl\ncr\r\x00\x1f\b\f", "ünïcødé \u2028\u2029 ☃", "bad \xff utf8"} {
		e := domain.Envelope{EventID: uuid.Must(uuid.NewV7()), TraceID: s, CorrelationID: s, CausationID: "c", ParentEventID: &parent,
			TenantID: domain.MustTenantID("acme"), SourceService: "imledger", TargetService: s, EventType: domain.EventGroupMessageSent, BizType: "group_message",
			BizID: s, IdempotencyKey: s, Version: 1, OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC),
			Actor: domain.Actor{Type: "user", ID: s}, StreamID: "grp1/m/" + s, StreamVersion: 1 << 40, Position: 77,
			Payload: json.RawMessage(`{"a":[1,"x"]}`)}
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("string %q:\n got %s\nwant %s", s, got, want)
		}
		e.Actor.KeyID = s
		want, _ = json.Marshal(e)
		if got := e.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("with a key id:\n got %s\nwant %s", got, want)
		}
		e.ParentEventID, e.TraceID, e.Actor.KeyID = nil, "", ""
		want, _ = json.Marshal(e)
		if got := e.AppendJSON(nil); !bytes.Equal(got, want) {
			t.Errorf("without optional fields:\n got %s\nwant %s", got, want)
		}
	}
}
