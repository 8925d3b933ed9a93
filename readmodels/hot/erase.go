package hot

import (
	"context"
	_ "embed" // Lua script
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/rediskeys"
)

//go:embed lua/erase.lua
var eraseLua string

var eraseScript = redis.NewScript(eraseLua)

// EraseUser replaces the content of every cached snapshot user sent in tenant with
// domain.ErasedContent (user.erased.v1, DESIGN §7a), as the snapshots of a rebuild read once
// the user's keys are destroyed. It scans the tenant's snapshot keys: erasure is rare and the
// snapshots live TTL at most. It returns how many it changed; it is idempotent. Errors wrap
// domain.ErrRetryable when Redis fails.
func (s *Store) EraseUser(ctx context.Context, tenant domain.TenantID, user domain.UserID) (int, error) {
	base := s.cfg.Prefix + tenant.String() + ":topic:{"
	var (
		mu   sync.Mutex // Scan calls back from one goroutine per cluster node
		keys []string
	)
	err := rediskeys.Scan(ctx, s.rdb, base+"*}:hot_msg:*", func(key string) {
		if strings.Contains(key, "}:hot_msg:") {
			mu.Lock()
			keys = append(keys, key)
			mu.Unlock()
		}
	})
	if err != nil {
		return 0, redisErr("hot: erase user: scan", err)
	}
	from := `"from":"` + user.String() + `"`
	n := 0
	for _, k := range keys {
		changed, err := eraseScript.Run(ctx, s.rdb, []string{k}, from, string(domain.ErasedContent)).Int()
		if err != nil {
			return n, redisErr("hot: erase user", err)
		}
		n += changed
	}
	return n, nil
}
