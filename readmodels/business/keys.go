package business

import (
	"strconv"
	"strings"

	"github.com/imledger/imledger/domain"
)

// Key layout (seed 000 §5.2), each under "<KeyPrefix><tenant>:". The braces are Redis Cluster
// hash tags: a group's keys share a slot, and so do a user's.
//
//	group:{<gid>}:profile         hash: topic, name, avatar, intro, owner_id, member_count,
//	                              announcement, status, version, created_at, updated_at (unix ms)
//	group:{<gid>}:settings        hash: join_approval, invite_policy, announce_policy, mute_all
//	group:{<gid>}:members         set: uids of current members
//	group:{<gid>}:admins          set: uids of members whose role is owner or admin
//	group:{<gid>}:muted           zset: uid -> muted_until in unix milliseconds, members muted
//	                              when the entry was filled (a reader compares the score to now)
//	relation:friends:{<uid>}      set: uid's friends
//	relation:blocklist:{<uid>}    set: the users uid blocks
//	user:{<uid>}:profile          hash: nickname, avatar, signature, version, updated_at (unix ms)
//
// Every set and zset also holds the member "0" (score 0), which no user id can be: it marks the
// entry as filled, so an empty member list or blocklist is cached too, and a reader can tell an
// empty entry from a missing one with one command. Readers never return it.
//
// Next to each entry "<key>:fence" holds a random token that every invalidation replaces; cache.go
// says why.
const sentinel = "0"

// fenceSuffix names the fence of a cache key.
const fenceSuffix = ":fence"

// keyspace builds the cache keys of one tenant.
type keyspace struct{ base string }

func (s *Store) keyspace(tenant domain.TenantID) keyspace {
	return keyspace{base: s.cfg.KeyPrefix + tenant.String() + ":"}
}

func (k keyspace) group(gid int64, what string) string {
	return k.base + "group:{" + strconv.FormatInt(gid, 10) + "}:" + what
}

func (k keyspace) groupProfile(gid int64) string  { return k.group(gid, "profile") }
func (k keyspace) groupSettings(gid int64) string { return k.group(gid, "settings") }
func (k keyspace) groupMembers(gid int64) string  { return k.group(gid, "members") }
func (k keyspace) groupAdmins(gid int64) string   { return k.group(gid, "admins") }
func (k keyspace) groupMuted(gid int64) string    { return k.group(gid, "muted") }

// groupAll lists every cache key of a group.
func (k keyspace) groupAll(gid int64) []string {
	return []string{k.groupProfile(gid), k.groupSettings(gid), k.groupMembers(gid), k.groupAdmins(gid), k.groupMuted(gid)}
}

func (k keyspace) friends(uid int64) string {
	return k.base + "relation:friends:{" + strconv.FormatInt(uid, 10) + "}"
}

func (k keyspace) blocklist(uid int64) string {
	return k.base + "relation:blocklist:{" + strconv.FormatInt(uid, 10) + "}"
}

func (k keyspace) userProfile(uid int64) string {
	return k.base + "user:{" + strconv.FormatInt(uid, 10) + "}:profile"
}

// scanPattern matches every key under the tenant's base; isCacheKey picks the cache entries.
func (k keyspace) scanPattern() string { return escapeGlob(k.base) + "*" }

// isCacheKey reports whether key, matched by scanPattern, is a cache entry of the layout above
// (not its fence, nor a key of another store sharing the prefix).
func (k keyspace) isCacheKey(key string) bool {
	rest, ok := strings.CutPrefix(key, k.base)
	if !ok || strings.HasSuffix(rest, fenceSuffix) {
		return false
	}
	for _, p := range []string{"group:{", "relation:friends:{", "relation:blocklist:{", "user:{"} {
		if strings.HasPrefix(rest, p) {
			return strings.Contains(rest[len(p):], "}")
		}
	}
	return false
}

// escapeGlob escapes the characters SCAN MATCH treats specially.
func escapeGlob(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', ']', '\\':
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}
