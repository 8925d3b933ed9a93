package hot

import (
	_ "embed" // Lua scripts
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels"
)

// Message is the message shape a snapshot holds; it is the same type MySQL reads return.
type Message = readmodels.Message

var (
	//go:embed lua/sent.lua
	sentLua string
	//go:embed lua/recall.lua
	recallLua string
	//go:embed lua/edit.lua
	editLua string
	//go:embed lua/max_set.lua
	maxSetLua string
	//go:embed lua/max_hset.lua
	maxHSetLua string
	//go:embed lua/skip.lua
	skipLua string
	//go:embed lua/watermark.lua
	watermarkLua string
	//go:embed lua/watermark_lib.lua
	watermarkLib string

	sentScript   = redis.NewScript(watermarkLib + sentLua)
	recallScript = redis.NewScript(recallLua)
	editScript   = redis.NewScript(editLua)
	maxSetScript = redis.NewScript(maxSetLua)
	maxHSet      = redis.NewScript(maxHSetLua)
	skipScript   = redis.NewScript(skipLua)
	wmScript     = redis.NewScript(watermarkLib + watermarkLua)
)

// Store keeps the Redis read model. It is safe for concurrent use. Every method that talks to
// Redis returns an error wrapping domain.ErrRetryable when Redis fails, so a projector retries and
// a reader falls back to MySQL.
type Store struct {
	rdb   redis.UniversalClient
	cfg   Config
	sizer GroupSizer
}

// NewStore returns a Store writing through rdb. sizer may be nil: every group is then hot.
func NewStore(rdb redis.UniversalClient, cfg Config, sizer GroupSizer) (*Store, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rdb == nil {
		return nil, errors.New("hot: a Redis client is required")
	}
	return &Store{rdb: rdb, cfg: cfg, sizer: sizer}, nil
}

// redisErr wraps a Redis failure; redis.Nil is not one and never reaches here.
func redisErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return domain.Retryable(op, fmt.Errorf("redis: %w", err))
}
