package presence

import (
	"github.com/imledger/imledger/domain"
)

// Key layout (seed 000 §5.1 and §5.4). <p> is Config.KeyPrefix, <t> the tenant. Braces make a
// user's keys, and a topic's keys, share one Redis Cluster slot, which the scripts need.
//
//	<p><t>:presence:user:{<uid>}                          hash: status, node, sessions, last_active_at, last_seen_at, ua
//	<p><t>:presence:user:{<uid>}:sessions                 zset: session id -> deadline (ms, Redis clock)
//	<p><t>:presence:user:{<uid>}:chan_nodes               zset: node -> deadline, nodes with a session of the user on its channel
//	<p><t>:presence:node:<node>:users                     set of user ids with a session on the node
//	<p><t>:topic:{<topic>}:online_members                 zset: uid -> deadline
//	<p><t>:topic:{<topic>}:node:<node>:online_members     zset: uid -> deadline, this node only
//	<p><t>:topic:{<topic>}:online_nodes                   zset: node -> deadline, nodes with members online
//	<p><t>:topic:{<topic>}:chan_nodes                     zset: node -> deadline, nodes with channel sessions watching the topic
//	<p>presence:node:<node>:marker                        string, TTL: Store.Run's sign that Redis kept this node's keys
//
// The sets seed 000 names "set" are sorted sets scored by deadline, so a crashed node's entries
// lapse one by one without a sweeper. last_active_at and last_seen_at are Unix milliseconds.
type keys struct{ prefix string }

func (k keys) user(t domain.TenantID, u domain.UserID) string {
	return k.prefix + t.String() + ":presence:user:{" + u.String() + "}"
}

func (k keys) userSessions(t domain.TenantID, u domain.UserID) string {
	return k.user(t, u) + ":sessions"
}

// userChanNodes is the zset of the nodes with a session of the user on its per-user channel.
func (k keys) userChanNodes(t domain.TenantID, u domain.UserID) string {
	return k.user(t, u) + ":chan_nodes"
}

// topicChanNodes is the zset of the nodes with channel sessions watching a group topic.
func (k keys) topicChanNodes(t domain.TenantID, topic domain.Topic) string {
	return k.topic(t, topic) + ":chan_nodes"
}

func (k keys) node(node string) string { return k.prefix + "presence:node:" + node + ":marker" }

func (k keys) nodeUsers(t domain.TenantID, node string) string {
	return k.prefix + t.String() + ":presence:node:" + node + ":users"
}

func (k keys) topic(t domain.TenantID, topic domain.Topic) string {
	return k.prefix + t.String() + ":topic:{" + topic.String() + "}"
}

func (k keys) topicMembers(t domain.TenantID, topic domain.Topic) string {
	return k.topic(t, topic) + ":online_members"
}

// topicNodePrefix and topicNodeSuffix enclose the node id in a per-node members key.
func (k keys) topicNodePrefix(t domain.TenantID, topic domain.Topic) string {
	return k.topic(t, topic) + ":node:"
}

const topicNodeSuffix = ":online_members"

func (k keys) topicNodeMembers(t domain.TenantID, topic domain.Topic, node string) string {
	return k.topicNodePrefix(t, topic) + node + topicNodeSuffix
}

func (k keys) topicNodes(t domain.TenantID, topic domain.Topic) string {
	return k.topic(t, topic) + ":online_nodes"
}

// topicKeys are the three keys the join and leave scripts take.
func (k keys) topicKeys(t domain.TenantID, topic domain.Topic, node string) []string {
	return []string{k.topicMembers(t, topic), k.topicNodeMembers(t, topic, node), k.topicNodes(t, topic)}
}
