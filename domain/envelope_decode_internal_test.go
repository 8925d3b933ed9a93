package domain

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// randomEnvelope is an envelope with random fields around a random message payload.
func randomEnvelope(r *rand.Rand, plain bool) Envelope {
	sent := randomSent(r, plain)
	payload, _ := json.Marshal(sent)
	e := Envelope{EventID: uuid.New(), TenantID: TenantID{v: "t" + string(rune('a'+r.IntN(26)))},
		EventType: EventGroupMessageSent, Version: r.IntN(3), OccurredAt: time.Unix(r.Int64N(2e9), r.Int64N(1e9)).UTC(),
		Actor: Actor{Type: ActorUser, ID: sent.From.String()}, StreamID: "grp" + sent.From.String(),
		StreamVersion: 1 + r.Int64N(1<<40), Position: r.Int64N(1 << 50), Payload: payload}
	if r.IntN(2) == 0 {
		e.TraceID, e.CausationID, e.BizType, e.BizID = sent.MessageID, sent.ClientMsgID, "message", sent.Topic
		e.SourceService, e.IdempotencyKey, e.CorrelationID, e.TargetService = SourceService, sent.ClientMsgID, "c", "x"
		parent := uuid.New()
		e.ParentEventID = &parent
		e.Actor = Actor{Type: ActorAdmin, ID: "ops-" + sent.ClientMsgID, KeyID: "k-" + sent.ClientMsgID}
	}
	return e
}

// checkSameEnvelope decodes data with DecodeEnvelope and with json.Unmarshal: the same value and
// the same error, and, when the scanner takes it, no error. It reports whether the scanner took it.
func checkSameEnvelope(t *testing.T, data []byte) bool {
	t.Helper()
	var probe Envelope
	took := decodeEnvelopeFast(data, &probe)
	got, err := DecodeEnvelope(data)
	var want Envelope
	wantErr := json.Unmarshal(data, &want)
	if took && wantErr != nil {
		t.Fatalf("the scanner took %q, which encoding/json refuses: %v", data, wantErr)
	}
	if !reflect.DeepEqual(got, want) || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("%q:\nDecodeEnvelope %+v, %v\nencoding/json  %+v, %v", data, got, err, want, wantErr)
	}
	return took
}

func TestDecodeEnvelopeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 12))
	for i := range 3000 {
		plain := i%3 != 0
		e := randomEnvelope(r, plain)
		wire := e.AppendJSON(nil)
		std, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, data := range [][]byte{wire, std, jsonbForm(t, std)} {
			if took := checkSameEnvelope(t, data); plain && !took {
				t.Fatalf("the scanner refused the canonical envelope %q", data)
			}
		}
	}
}

func TestDecodeEnvelopeLeavesTheRestToEncodingJSON(t *testing.T) {
	t.Parallel()
	const ok = `"event_id":"0192f0c1-7a4e-7cc1-9a55-3c2b1f0a9d10","tenant_id":"demo","event_type":"x","stream_id":"s"`
	refused := []string{
		`{` + ok + `,"tenant_id":"demo"}`,                       // a repeated key
		`{` + ok + `,"Version":1}`,                              // a key in another case
		`{` + ok + `,"extra":1}`,                                // a key it does not know
		`{` + ok + `,"version":1.0}`,                            // not an integer
		`{` + ok + `,"version":"1"}`,                            // quoted
		`{` + ok + `,"stream_version":2}`,                       // not quoted
		`{` + ok + `,"payload":null}`,                           // null
		`{` + ok + `,"parent_event_id":null}`,                   // null
		`{` + ok + `,"actor":{"type":"user","id":"1","x":"y"}}`, // an actor key it does not know
		`{` + ok + `,"actor":{"type":"user","type":"admin"}}`,   // a repeated actor key
		`{` + ok + `,"actor":null}`,
		`{"event_id":"nope","tenant_id":"demo"}`,            // not a uuid
		`{"tenant_id":"Demo"}`,                              // not a tenant id
		`{` + ok + `,"payload":{"a":}}`,                     // a broken payload
		`{` + ok + `,"occurred_at":"2026-13-01T00:00:00Z"}`, // not a time
		`{` + ok + `,"trace_id":"a\u0062"}`,                 // an escape
		`{` + ok + `} {}`,                                   // trailing data
	}
	for _, data := range refused {
		if checkSameEnvelope(t, []byte(data)) {
			t.Errorf("the scanner took %s", data)
		}
	}
	taken := []string{
		`{}`,
		` { "actor" : { } , ` + ok + ` , "version" : -0 , "payload" : [ 1 , "2" ] } `,
		`{"event_id":"{0192f0c1-7a4e-7cc1-9a55-3c2b1f0a9d10}"}`, // a form uuid.Parse takes too
	}
	for _, data := range taken {
		if !checkSameEnvelope(t, []byte(data)) {
			t.Errorf("the scanner refused %s", data)
		}
	}
}

func TestDecodeEnvelopeUnderDamage(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(13, 14))
	took := 0
	for range 20000 {
		e := randomEnvelope(r, true)
		if checkSameEnvelope(t, damage(r, e.AppendJSON(nil))) {
			took++
		}
	}
	if took == 0 {
		t.Fatal("the scanner took no damaged envelope: the test checks nothing")
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	r := rand.New(rand.NewPCG(15, 16))
	for range 20 {
		e := randomEnvelope(r, r.IntN(2) == 0)
		f.Add(e.AppendJSON(nil))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkSameEnvelope(t, data)
	})
}

func BenchmarkDecodeEnvelope(b *testing.B) {
	r := rand.New(rand.NewPCG(17, 18))
	e := randomEnvelope(r, true)
	data := e.AppendJSON(nil)
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			var e Envelope
			if err := json.Unmarshal(data, &e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("DecodeEnvelope", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeEnvelope(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// validTenantID agrees with the pattern the tenant id is documented by.
func TestValidTenantIDMatchesItsPattern(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^[a-z0-9][a-z0-9_]{0,31}$`)
	r := rand.New(rand.NewPCG(19, 20))
	alphabet := "az09_AZ-. é\x00"
	for range 50000 {
		b := make([]byte, r.IntN(35))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if got, want := validTenantID(string(b)), re.Match(b); got != want {
			t.Fatalf("%q: validTenantID %v, pattern %v", b, got, want)
		}
	}
	for _, s := range []string{"a", "demo", "0_", strings.Repeat("a", 32)} {
		if !validTenantID(s) {
			t.Errorf("%q refused", s)
		}
	}
	for _, s := range []string{"", "_a", "A", strings.Repeat("a", 33)} {
		if validTenantID(s) {
			t.Errorf("%q taken", s)
		}
	}
}
