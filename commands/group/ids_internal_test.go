package group

import (
	"testing"
	"time"
)

// Snowflake ids are positive, unique and increasing, carry the node id, and keep increasing when
// the clock steps back or one millisecond runs out of sequence numbers.
func TestSnowflake(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, err := NewSnowflake(513)
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return clock }
	var last int64
	for i := range 10_000 {
		switch i {
		case 3000:
			clock = clock.Add(-time.Minute) // the clock steps back
		case 6000:
			clock = clock.Add(2 * time.Minute)
		}
		id, err := s.NewGroupID(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if int64(id) <= last {
			t.Fatalf("id %d: %d after %d", i, id, last)
		}
		if node := int64(id) >> snowflakeSeqBits & MaxSnowflakeNode; node != 513 {
			t.Fatalf("id %d carries node %d", id, node)
		}
		last = int64(id)
	}
	if _, err := NewSnowflake(MaxSnowflakeNode + 1); err == nil {
		t.Error("node 1024 accepted")
	}
	s.now = func() time.Time { return SnowflakeEpoch.Add(-time.Second) }
	s.lastMs = -1
	if _, err := s.NewGroupID(t.Context()); err == nil {
		t.Error("clock before the epoch accepted")
	}
}
