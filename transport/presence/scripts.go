package presence

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/online.lua
	onlineSrc string
	//go:embed lua/offline.lua
	offlineSrc string
	//go:embed lua/get.lua
	getSrc string
	//go:embed lua/join.lua
	joinSrc string
	//go:embed lua/leave.lua
	leaveSrc string
	//go:embed lua/nodes.lua
	nodesSrc string
	//go:embed lua/member.lua
	memberSrc string
	//go:embed lua/chan_add.lua
	chanAddSrc string

	onlineScript  = redis.NewScript(onlineSrc)
	offlineScript = redis.NewScript(offlineSrc)
	getScript     = redis.NewScript(getSrc)
	joinScript    = redis.NewScript(joinSrc)
	leaveScript   = redis.NewScript(leaveSrc)
	nodesScript   = redis.NewScript(nodesSrc)
	memberScript  = redis.NewScript(memberSrc)
	chanAddScript = redis.NewScript(chanAddSrc)
)
