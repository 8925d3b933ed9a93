package group

import (
	"strconv"
	"strings"

	"github.com/imledger/imledger/domain"
)

// streamKind tells the four cached aggregate streams apart.
type streamKind uint8

const (
	kindGroup    streamKind = iota + 1 // "group:<gid>"
	kindMember                         // "member:<gid>:<uid>"
	kindRelation                       // "relation:<lo>:<hi>"
	kindProfile                        // "user:<uid>"
)

// stateKey names a cached state without building its stream id, so a cache hit allocates
// nothing. For relations a < b.
type stateKey struct {
	tenant string
	kind   streamKind
	a, b   int64
}

func groupKey(t domain.TenantID, g domain.GroupID) stateKey {
	return stateKey{tenant: t.String(), kind: kindGroup, a: int64(g)}
}

func memberKey(t domain.TenantID, g domain.GroupID, u domain.UserID) stateKey {
	return stateKey{tenant: t.String(), kind: kindMember, a: int64(g), b: int64(u)}
}

func relationKey(t domain.TenantID, x, y domain.UserID) stateKey {
	if x > y {
		x, y = y, x
	}
	return stateKey{tenant: t.String(), kind: kindRelation, a: int64(x), b: int64(y)}
}

func profileKey(t domain.TenantID, u domain.UserID) stateKey {
	return stateKey{tenant: t.String(), kind: kindProfile, a: int64(u)}
}

// keyOfStream parses a stream id of one of the four cached kinds; ok is false for any other
// stream (nothing of it is cached).
func keyOfStream(t domain.TenantID, streamID string) (stateKey, bool) {
	prefix, rest, _ := strings.Cut(streamID, ":")
	first, second, two := strings.Cut(rest, ":")
	a, err := strconv.ParseInt(first, 10, 64)
	if err != nil {
		return stateKey{}, false
	}
	var b int64
	if two {
		if b, err = strconv.ParseInt(second, 10, 64); err != nil {
			return stateKey{}, false
		}
	}
	k := stateKey{tenant: t.String(), a: a, b: b}
	switch {
	case prefix == "group" && !two:
		k.kind = kindGroup
	case prefix == "member" && two:
		k.kind = kindMember
	case prefix == "relation" && two:
		k.kind = kindRelation
	case prefix == "user" && !two:
		k.kind = kindProfile
	default:
		return stateKey{}, false
	}
	return k, true
}

// lockKey names a stream for the per-process command stripes.
func lockKey(t domain.TenantID, streamID string) string { return t.String() + "/" + streamID }
