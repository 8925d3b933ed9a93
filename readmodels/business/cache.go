package business

import (
	"context"
	_ "embed" // Lua scripts
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
)

var (
	//go:embed lua/fill.lua
	fillLua    string
	fillScript = redis.NewScript(fillLua)
)

// Cache-aside protocol. A reader that misses reads the entry's fence in the same round trip, then
// reads MySQL, then fills the entry with fill.lua, which refuses when the fence changed or the
// entry exists. A writer commits MySQL first and then, for each stale entry, sets a new random
// fence and deletes the entry. So an entry filled from a MySQL read that raced a commit never
// survives: either the writer's fence lands before the fill (refused) or its delete lands after
// it (removed). Deletes commute, so concurrent writers need no ordering among themselves.

// fenceSeen returns the value a GET of a fence returned, "" when it does not exist.
func fenceSeen(c *redis.StringCmd) string { return c.Val() }

// cmdErr returns the first real error of cmds; a missing key (redis.Nil) is not one.
func cmdErr(cmds ...redis.Cmder) error {
	for _, c := range cmds {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
	}
	return nil
}

// fill stores an entry read from MySQL (see fill.lua). A failure only costs the next reader a
// miss; it is logged and starts the Redis backoff.
func (s *Store) fill(ctx context.Context, tenant domain.TenantID, rdb redis.UniversalClient, key, seen, kind string, args []string) {
	argv := make([]any, 0, 3+len(args))
	argv = append(argv, seen, s.cfg.CacheTTL.Milliseconds(), kind)
	for _, a := range args {
		argv = append(argv, a)
	}
	if err := fillScript.Run(ctx, rdb, []string{key, key + fenceSuffix}, argv...).Err(); err != nil {
		s.redisFailed(ctx, tenant, "fill "+kind, err)
	}
}

// setHas answers whether member is in the set entry key: from Redis when the entry is filled,
// else from loadAll (then filling the entry), or from point alone when Redis is unavailable, so
// an outage never loads a whole member list to answer one question.
func (s *Store) setHas(ctx context.Context, tenant domain.TenantID, key string, member int64,
	loadAll func(context.Context) ([]int64, error), point func(context.Context) (bool, error)) (bool, error) {
	rdb := s.redis()
	if rdb == nil {
		return point(ctx)
	}
	var has *redis.BoolSliceCmd
	var fence *redis.StringCmd
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		has = p.SMIsMember(ctx, key, strconv.FormatInt(member, 10), sentinel)
		fence = p.Get(ctx, key+fenceSuffix)
		return nil
	})
	if err := cmdErr(has, fence); err != nil {
		s.redisFailed(ctx, tenant, "read "+key, err)
		return point(ctx)
	}
	if v := has.Val(); len(v) == 2 && v[1] {
		return v[0], nil
	}
	all, err := loadAll(ctx)
	if err != nil {
		return false, err
	}
	s.fill(ctx, tenant, rdb, key, fenceSeen(fence), "set", setArgs(all))
	return slices.Contains(all, member), nil
}

// setMembers returns the ids in the set entry key (sorted), loading and filling it on a miss.
func (s *Store) setMembers(ctx context.Context, tenant domain.TenantID, key string, loadAll func(context.Context) ([]int64, error)) ([]int64, error) {
	sets, errs := s.setsMembers(ctx, tenant, []string{key}, func(ctx context.Context, _ int) ([]int64, error) { return loadAll(ctx) })
	return sets[0], errs[0]
}

// setsMembers is setMembers for many entries, read in one round trip; load(ctx, i) reads entry
// i from MySQL. Each answer comes with its own error.
func (s *Store) setsMembers(ctx context.Context, tenant domain.TenantID, keys []string,
	load func(ctx context.Context, i int) ([]int64, error)) ([][]int64, []error) {
	sets, errs := make([][]int64, len(keys)), make([]error, len(keys))
	rdb := s.redis()
	if rdb == nil || len(keys) == 0 {
		for i := range keys {
			sets[i], errs[i] = load(ctx, i)
		}
		return sets, errs
	}
	members, fences := make([]*redis.StringSliceCmd, len(keys)), make([]*redis.StringCmd, len(keys))
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, key := range keys {
			members[i], fences[i] = p.SMembers(ctx, key), p.Get(ctx, key+fenceSuffix)
		}
		return nil
	})
	failed := false
	for i, key := range keys {
		if err := cmdErr(members[i], fences[i]); err != nil {
			if !failed { // a broken connection fails every entry: one report
				s.redisFailed(ctx, tenant, "read "+key, err)
				failed = true
			}
			sets[i], errs[i] = load(ctx, i)
			continue
		}
		if ids, ok := parseSet(members[i].Val()); ok {
			sets[i] = ids
			continue
		}
		if sets[i], errs[i] = load(ctx, i); errs[i] == nil {
			s.fill(ctx, tenant, rdb, key, fenceSeen(fences[i]), "set", setArgs(sets[i]))
		}
	}
	return sets, errs
}

// parseSet turns a filled set entry into sorted ids; ok is false when the entry is not filled (no
// sentinel) or holds something that is not an id.
func parseSet(vals []string) ([]int64, bool) {
	filled := false
	ids := make([]int64, 0, len(vals))
	for _, v := range vals {
		if v == sentinel {
			filled = true
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, false
		}
		ids = append(ids, n)
	}
	slices.Sort(ids)
	return ids, filled
}

// setArgs is the fill of a set entry: the sentinel and every id.
func setArgs(ids []int64) []string {
	out := make([]string, 0, len(ids)+1)
	out = append(out, sentinel)
	for _, id := range ids {
		out = append(out, strconv.FormatInt(id, 10))
	}
	return out
}

// cachedHash returns the hash entry key decoded by decode, or, on a miss, the field/value pairs
// load reads from MySQL (then filling the entry). load's error (domain.ErrNotFound for an entity
// that does not exist) is returned as it is and nothing is cached for it. Both paths decode the
// same field map, so a cached answer and a MySQL answer are the same by construction.
func cachedHash[T any](ctx context.Context, s *Store, tenant domain.TenantID, key string,
	load func(context.Context) ([]string, error), decode func(map[string]string) (T, error)) (T, error) {
	rdb := s.redis()
	seen := ""
	if rdb != nil {
		var fields *redis.MapStringStringCmd
		var fence *redis.StringCmd
		_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			fields = p.HGetAll(ctx, key)
			fence = p.Get(ctx, key+fenceSuffix)
			return nil
		})
		if err := cmdErr(fields, fence); err != nil {
			s.redisFailed(ctx, tenant, "read "+key, err)
			rdb = nil
		} else if m := fields.Val(); len(m) > 0 {
			if v, err := decode(m); err == nil {
				return v, nil
			}
			// A corrupt entry is replaced below: drop it so the fill is not refused.
			_ = rdb.Del(ctx, key).Err()
		}
		seen = fenceSeen(fence)
	}
	pairs, err := load(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	if rdb != nil {
		s.fill(ctx, tenant, rdb, key, seen, "hash", pairs)
	}
	return decode(pairsToMap(pairs))
}

func pairsToMap(pairs []string) map[string]string {
	m := make(map[string]string, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return m
}

// unixMillis is t as the caches store it; "0" for the zero time.
func unixMillis(t time.Time) string {
	if t.IsZero() {
		return "0"
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// fromMillis reverses unixMillis.
func fromMillis(s string) (time.Time, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n == 0 {
		return time.Time{}, err
	}
	return time.UnixMilli(n).UTC(), nil
}
