package group

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/imledger/imledger/domain"
)

// IDGenerator draws new group ids. Ids must be positive and should not repeat; a repeated id is
// caught by the group stream's expected version and CreateGroup draws again.
type IDGenerator interface {
	NewGroupID(ctx context.Context) (domain.GroupID, error)
}

// Snowflake layout: 41 bits of milliseconds since SnowflakeEpoch, 10 bits of node id, 12 bits
// of sequence within the millisecond; the sign bit stays 0, so ids are positive int64s that
// sort by creation time (JSON carries them as strings).
const (
	snowflakeNodeBits = 10
	snowflakeSeqBits  = 12
	// MaxSnowflakeNode is the largest node id.
	MaxSnowflakeNode = 1<<snowflakeNodeBits - 1
	snowflakeMaxSeq  = 1<<snowflakeSeqBits - 1
)

// SnowflakeEpoch is the zero of snowflake timestamps; ids stay positive for 69 years after it.
var SnowflakeEpoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// Snowflake is an IDGenerator of snowflake-style ids: unique across nodes as long as every node
// has its own node id, and strictly increasing per node even when the wall clock steps back (it
// then keeps counting from the last millisecond it used) or more than 4096 ids are drawn in one
// millisecond (it borrows the next millisecond). Safe for concurrent use.
type Snowflake struct {
	mu     sync.Mutex
	node   int64
	lastMs int64
	seq    int64
	now    func() time.Time
}

// NewSnowflake returns a generator for node (0..MaxSnowflakeNode).
func NewSnowflake(node int64) (*Snowflake, error) {
	if node < 0 || node > MaxSnowflakeNode {
		return nil, fmt.Errorf("snowflake: node must be 0 to %d, got %d", MaxSnowflakeNode, node)
	}
	return &Snowflake{node: node, lastMs: -1, now: time.Now}, nil
}

// NewGroupID returns the next id. It fails only when the clock is before SnowflakeEpoch.
func (s *Snowflake) NewGroupID(context.Context) (domain.GroupID, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ms := s.now().Sub(SnowflakeEpoch).Milliseconds()
	if ms < 0 {
		return 0, fmt.Errorf("snowflake: clock is before %s", SnowflakeEpoch.Format(time.RFC3339))
	}
	switch {
	case ms > s.lastMs:
		s.lastMs, s.seq = ms, 0
	case s.seq < snowflakeMaxSeq:
		s.seq++
	default:
		s.lastMs, s.seq = s.lastMs+1, 0
	}
	id := s.lastMs<<(snowflakeNodeBits+snowflakeSeqBits) | s.node<<snowflakeSeqBits | s.seq
	return domain.GroupID(id), nil
}
