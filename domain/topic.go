package domain

import (
	"strconv"
	"strings"
)

// TopicKind is the kind of a conversation topic.
type TopicKind string

// The topic kinds.
const (
	TopicGroup  TopicKind = "group"  // "grp<group_id>"
	TopicDirect TopicKind = "direct" // "p2p<low_uid>_<high_uid>"
)

// MaxTopicLen is the longest topic name accepted (the read-model column is VARCHAR(64)).
const MaxTopicLen = 64

// Topic names a conversation. Group topics are "grp" followed by the decimal group id; 1:1 topics
// are "p2p<low>_<high>" built from the two user ids in ascending order, so both sides address the
// same topic. The topic name is also the id of the conversation's message stream.
type Topic struct {
	name  string
	kind  TopicKind
	group int64
	a, b  UserID
}

// GroupTopic returns the topic of group id.
func GroupTopic(groupID int64) (Topic, error) {
	if groupID <= 0 {
		return Topic{}, invalid("group_id", "bad_format", "a positive 64-bit number")
	}
	return Topic{name: "grp" + strconv.FormatInt(groupID, 10), kind: TopicGroup, group: groupID}, nil
}

// DirectTopic returns the canonical 1:1 topic of two distinct users.
func DirectTopic(x, y UserID) (Topic, error) {
	if x <= 0 || y <= 0 {
		return Topic{}, invalid("user_id", "bad_format", "a positive 64-bit number")
	}
	if x == y {
		return Topic{}, invalid("topic", "self_direct", "a 1:1 topic needs two distinct users")
	}
	if x > y {
		x, y = y, x
	}
	return Topic{name: "p2p" + x.String() + "_" + y.String(), kind: TopicDirect, a: x, b: y}, nil
}

// ParseTopic validates a topic name and returns its parsed form.
func ParseTopic(s string) (Topic, error) {
	switch {
	case s == "":
		return Topic{}, invalid("topic", "required", "")
	case len(s) > MaxTopicLen:
		return Topic{}, invalid("topic", "too_long", "at most 64 bytes")
	case strings.HasPrefix(s, "grp"):
		id, err := strconv.ParseInt(s[3:], 10, 64)
		if err != nil || id <= 0 || "grp"+strconv.FormatInt(id, 10) != s {
			return Topic{}, invalid("topic", "bad_format", "group topics are grp<positive id>")
		}
		return GroupTopic(id)
	case strings.HasPrefix(s, "p2p"):
		lo, hi, ok := strings.Cut(s[3:], "_")
		x, err1 := ParseUserID(lo)
		y, err2 := ParseUserID(hi)
		if !ok || err1 != nil || err2 != nil || x >= y || "p2p"+x.String()+"_"+y.String() != s {
			return Topic{}, invalid("topic", "bad_format", "1:1 topics are p2p<low uid>_<high uid>")
		}
		return DirectTopic(x, y)
	default:
		return Topic{}, invalid("topic", "unknown_kind", "topic must start with grp or p2p")
	}
}

// String returns the topic name.
func (t Topic) String() string { return t.name }

// Kind returns the topic kind.
func (t Topic) Kind() TopicKind { return t.kind }

// IsZero reports whether t is unset.
func (t Topic) IsZero() bool { return t.name == "" }

// GroupID returns the group id of a group topic, 0 otherwise.
func (t Topic) GroupID() int64 { return t.group }

// Parties returns the two users of a 1:1 topic in ascending order; zero for group topics.
func (t Topic) Parties() (UserID, UserID) { return t.a, t.b }

// Has reports whether u is one of the two parties of a 1:1 topic.
func (t Topic) Has(u UserID) bool { return t.kind == TopicDirect && (u == t.a || u == t.b) }

// Peer returns the other party of a 1:1 topic.
func (t Topic) Peer(u UserID) UserID {
	if u == t.a {
		return t.b
	}
	return t.a
}

// MarshalText implements encoding.TextMarshaler.
func (t Topic) MarshalText() ([]byte, error) { return []byte(t.name), nil }

// UnmarshalText parses and validates the topic.
func (t *Topic) UnmarshalText(b []byte) error {
	v, err := ParseTopic(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}
