package userchan

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/rediskeys"
)

// EraseUser replaces the content of every message of user kept in the tenant's channel logs
// (the first message of a conversation, logged on both parties' channels) with
// domain.ErasedContent, once the user is erased (DESIGN §7a). It scans the tenant's logs:
// erasure is rare, and the logs live Config.LogTTL at most. It returns how many items it
// changed; it is idempotent. Errors wrap domain.ErrRetryable when Redis fails.
func (l *Log) EraseUser(ctx context.Context, tenant domain.TenantID, user domain.UserID) (int, error) {
	var (
		mu   sync.Mutex // Scan calls back from one goroutine per cluster node
		logs []string
	)
	err := rediskeys.Scan(ctx, l.rdb, l.cfg.KeyPrefix+tenant.String()+":uchan:{*}:log", func(key string) {
		mu.Lock()
		logs = append(logs, key)
		mu.Unlock()
	})
	if err != nil {
		return 0, domain.Retryable("userchan: erase user: scan", err)
	}
	mark := `"message":{"seq":"`
	from := `","from":"` + user.String() + `"`
	n := 0
	for _, key := range logs {
		items, err := l.rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			return n, domain.Retryable("userchan: erase user: read", err)
		}
		for _, z := range items {
			item, _ := z.Member.(string)
			erased, ok := eraseContent(item, mark, from)
			if !ok {
				continue
			}
			if _, err := l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.ZRem(ctx, key, item)
				p.ZAdd(ctx, key, redis.Z{Score: z.Score, Member: erased})
				return nil
			}); err != nil {
				return n, domain.Retryable(fmt.Sprintf("userchan: erase user: rewrite %s", key), err)
			}
			n++
		}
	}
	return n, nil
}

// eraseContent returns item with its message's content replaced by domain.ErasedContent when
// the message is from the user named by from; ok is false when there is nothing to replace.
// An item ends with its message, then its own ts (see Item.body); a message ends with content.
func eraseContent(item, mark, from string) (string, bool) {
	i := strings.Index(item, mark)
	if i < 0 {
		return "", false
	}
	rest := item[i+len(mark):]
	if j := strings.IndexByte(rest, '"'); j < 0 || !strings.HasPrefix(rest[j:], from) {
		return "", false
	}
	c := strings.Index(item[i:], `,"content":`)
	end := strings.LastIndex(item, `},"ts":"`)
	if c < 0 || i+c >= end {
		return "", false
	}
	start := i + c + len(`,"content":`)
	if item[start:end] == string(domain.ErasedContent) {
		return "", false
	}
	return item[:start] + string(domain.ErasedContent) + item[end:], true
}
