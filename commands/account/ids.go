package account

import (
	"context"
	"crypto/rand"
	"encoding/binary"

	"github.com/imledger/imledger/commands/group"
	"github.com/imledger/imledger/domain"
)

// IDGenerator draws the ids of new users: positive int64s, unique in practice. A drawn id that
// is already taken is detected (the user's stream is not empty) and drawn again.
type IDGenerator interface {
	NewUserID(ctx context.Context) (domain.UserID, error)
}

// SnowflakeIDs draws user ids from a Snowflake generator (see commands/group): time-ordered,
// positive, unique per node id.
type SnowflakeIDs struct{ s *group.Snowflake }

// NewSnowflakeIDs returns a generator for node (0..group.MaxSnowflakeNode). Give each node of a
// cluster its own node id; ids of two nodes with the same node id may collide, which Register
// survives by drawing again.
func NewSnowflakeIDs(node int64) (*SnowflakeIDs, error) {
	s, err := group.NewSnowflake(node)
	if err != nil {
		return nil, err
	}
	return &SnowflakeIDs{s: s}, nil
}

// NewUserID returns the next id.
func (g *SnowflakeIDs) NewUserID(ctx context.Context) (domain.UserID, error) {
	id, err := g.s.NewGroupID(ctx)
	return domain.UserID(id), err
}

// randomSnowflake is the default generator: a Snowflake with a random node id.
func randomSnowflake() IDGenerator {
	var b [2]byte
	_, _ = rand.Read(b[:])
	g, _ := NewSnowflakeIDs(int64(binary.BigEndian.Uint16(b[:]) % (group.MaxSnowflakeNode + 1)))
	return g
}
