package wsbench

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestCheckContentNeedsTheSendersBytes(t *testing.T) {
	t.Parallel()
	pad := padding(100)
	sent := appendContent(nil, 1_700_000_000_123_456_789, 7, 42, pad)
	if n := len(sent); n < 90 || n > 110 {
		t.Errorf("content of about 100 bytes is %d: %s", n, sent)
	}
	f, exact, ok, _ := checkContent(sent, pad, nil)
	if !ok || !exact || f.SentNS != 1_700_000_000_123_456_789 || f.From != 7 || f.K != 42 {
		t.Errorf("checkContent(sent) = %+v exact %v ok %v", f, exact, ok)
	}
	// What a gateway that decoded and re-encoded the content would deliver: compacted, with
	// "<&>" escaped. It carries the same values, and must not count as exact.
	var v map[string]any
	if err := json.Unmarshal(sent, &v); err != nil {
		t.Fatal(err)
	}
	reencoded, _ := json.Marshal(v)
	var compact bytes.Buffer
	_ = json.Compact(&compact, sent)
	otherPad := appendContent(nil, 1_700_000_000_123_456_789, 7, 42, padding(101))
	for name, b := range map[string][]byte{"re-encoded": reencoded, "compacted": compact.Bytes(), "another pad": otherPad} {
		if _, exact, ok, _ := checkContent(b, pad, nil); !ok || exact {
			t.Errorf("%s content %s: ok %v exact %v, want ok and not exact", name, b, ok, exact)
		}
	}
	if _, _, ok, _ := checkContent([]byte(`"hello"`), pad, nil); ok {
		t.Error("a plain string counted as benchmark content")
	}
}
