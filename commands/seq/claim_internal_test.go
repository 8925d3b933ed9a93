package seq

import (
	"encoding/json"
	"testing"
	"time"
)

// TestEncodeClaimWritesWhatEncodingJSONWrites: the written-out encoder matches json.Marshal
// byte for byte, escapes and omitted fields included, and decodes back to the same claim.
func TestEncodeClaimWritesWhatEncodingJSONWrites(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 8, 1, 2, 3, 456789000, time.UTC)
	whole := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	zone := time.Date(2026, 6, 1, 12, 0, 0, 1, time.FixedZone("x", 5*3600+1800))
	for _, v := range []claimValue{
		{Status: "pending", CreatedAt: at},
		{Status: "pending", Node: "node-1", Instance: "i-2", Nonce: "n3", CreatedAt: at},
		{Status: "done", Seq: 42, MessageID: "01938f2e-7c1a-7000-8000-000000000001", SentAt: &whole, CreatedAt: at},
		{Status: "done", Seq: -1, MessageID: `a"b\c<d>&e`, SentAt: &zone, CreatedAt: zone},
		{Status: "failed", Node: "nœud\u2028\x01", CreatedAt: time.Time{}},
		{Status: "done", Seq: 1, MessageID: "\xff invalid utf-8", CreatedAt: at},
	} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeClaim(v); got != string(want) {
			t.Errorf("encodeClaim = %s\n      want %s", got, want)
		}
		if _, err := decodeClaim(encodeClaim(v)); err != nil {
			t.Errorf("decodeClaim(%s): %v", encodeClaim(v), err)
		}
	}
}
