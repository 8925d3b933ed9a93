package replay

import (
	"fmt"
	"hash/fnv"
	"testing"

	"github.com/imledger/imledger/domain"
)

func TestFNV32aIsHashFNV(t *testing.T) {
	for _, s := range []string{"", "grp1", "p2p12_34", "grp386569318378987520"} {
		h := fnv.New32a()
		_, _ = h.Write([]byte(s))
		if got, want := fnv32a(s), h.Sum32(); got != want {
			t.Errorf("fnv32a(%q) = %d, want %d", s, got, want)
		}
	}
}

// splitByConversation keeps every event, puts all of a conversation's events in one part, in
// their order, and makes each part exactly as large as it needs.
func TestSplitByConversation(t *testing.T) {
	var events []domain.Envelope
	for i := range 1000 {
		stream := fmt.Sprintf("grp%d", i%37)
		if i%5 == 0 {
			stream += "/r1" // another stream of the same conversation
		}
		events = append(events, domain.Envelope{StreamID: stream, Position: int64(i + 1)})
	}
	parts := splitByConversation(events, 3)
	partOf := map[string]int{}
	total := 0
	for i, part := range parts {
		if cap(part) != len(part) {
			t.Errorf("part %d: %d events in capacity %d", i, len(part), cap(part))
		}
		total += len(part)
		var last int64
		for _, e := range part {
			key := domain.ConversationKey(e.StreamID)
			if p, ok := partOf[key]; ok && p != i {
				t.Fatalf("conversation %s in parts %d and %d", key, p, i)
			}
			partOf[key] = i
			if e.Position <= last {
				t.Fatalf("part %d: position %d after %d", i, e.Position, last)
			}
			last = e.Position
		}
	}
	if total != len(events) {
		t.Fatalf("%d events in the parts, want %d", total, len(events))
	}
}
