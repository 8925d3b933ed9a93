package presence

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
)

// GetMany returns the presence of many users of one tenant in one Redis round trip: out[i] is
// users[i]'s, as Get would answer it. Unlike Get it fails when Redis does not answer (wrapped as
// domain.ErrRetryable), so a caller deciding who is offline never mistakes "unknown" for
// "offline"; the failure is counted and logged as Get's.
func (s *Store) GetMany(ctx context.Context, tenant domain.TenantID, users []domain.UserID) ([]Presence, error) {
	cmds := make([]*redis.Cmd, len(users))
	err := redisscript.Pipelined(ctx, s.rdb, func(b *redisscript.Batch) {
		for i, u := range users {
			cmds[i] = b.EvalRO(getScript, []string{s.keys.user(tenant, u), s.keys.userSessions(tenant, u)})
		}
	})
	if err != nil {
		if ctx.Err() == nil {
			s.failed(ctx, "get_many", tenant, err)
		}
		return nil, domain.Retryable("presence: get many", err)
	}
	out := make([]Presence, len(users))
	for i, c := range cmds {
		res, err := c.Slice()
		if err != nil || len(res) != 6 {
			s.failed(ctx, "get_many", tenant, err)
			return nil, domain.Retryable("presence: get many", err)
		}
		out[i] = parsePresence(res)
	}
	return out, nil
}
