package seq

import (
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
)

var (
	//go:embed lua/allocate.lua
	allocateSrc string
	//go:embed lua/seed.lua
	seedSrc string
	//go:embed lua/reallocate.lua
	reallocateSrc string
	//go:embed lua/fail.lua
	failSrc string

	allocateScript   = redis.NewScript(allocateSrc)
	seedScript       = redis.NewScript(seedSrc)
	reallocateScript = redis.NewScript(reallocateSrc)
	failScript       = redis.NewScript(failSrc)
)

// scriptCall is one script invocation in a pipelined batch (see internal/redisscript).
type scriptCall = redisscript.Call

// retryableReplies are Redis error replies that describe a transient server state.
var retryableReplies = []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN",
	"READONLY", "NOREPLICAS", "MOVED", "ASK", "ERR max number of clients"}

// redisErr wraps a Redis failure for operation op. Connection failures, timeouts and transient
// server states become *domain.RetryableError; other error replies (a script bug) stay plain.
func redisErr(op string, err error) error {
	var reply redis.Error
	if errors.As(err, &reply) {
		msg := reply.Error()
		for _, p := range retryableReplies {
			if strings.HasPrefix(msg, p) {
				return domain.Retryable(op, err)
			}
		}
		return fmt.Errorf("%s: %w", op, err)
	}
	return domain.Retryable(op, err)
}
