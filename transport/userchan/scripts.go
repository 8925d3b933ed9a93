package userchan

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/append.lua
	appendSrc string
	//go:embed lua/read.lua
	readSrc string
	//go:embed lua/tail.lua
	tailSrc string

	appendScript = redis.NewScript(appendSrc)
	readScript   = redis.NewScript(readSrc)
	tailScript   = redis.NewScript(tailSrc)
)
