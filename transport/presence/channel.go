package presence

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
)

// Per-user channel registrations. A session on its user's channel (the WebSocket "me" topic)
// must hear of every message of every conversation of the user, subscribed or not, on whatever
// node the message commits. The committing node finds the nodes to send a message to as it finds
// those with online members of the topic (NodesForTopics): a node registers itself, not each
// user, in a zset per watched group topic (chan_nodes), and in a zset per channel user, which
// 1:1 topics are routed by (their two users are in the topic name) and which the channel log
// reads when it appends an item for the user. A message to a group of 10,000 thus costs the
// same one Redis read as before, whoever of its members is online and where.
//
// Registrations are counted per node in memory and written when the first local session
// registers a key and removed with the last, under chanMu, so a removal never lands after a
// newer addition. The heartbeat (Run) refreshes every registration of the node each
// TouchInterval; a crashed node's entries lapse after TTL.

// chanTopicKey names a watched topic of a tenant on this node.
type chanTopicKey struct {
	tenant domain.TenantID
	topic  string
}

// watched is a topic's count of local channel sessions watching it.
type watched struct {
	topic domain.Topic
	n     int
}

// ChannelNodesKey is the Redis key of the zset of nodes (node -> deadline in Unix milliseconds,
// Redis clock) with a session of user on its channel. Its hash tag is the user's, so a script
// over the user's other keys (the channel log) may read it.
func (st *Store) ChannelNodesKey(tenant domain.TenantID, user domain.UserID) string {
	return st.keys.userChanNodes(tenant, user)
}

// ChannelOn records that the session is on its user's channel, watching topics (group topics;
// other topics are ignored: a 1:1 topic is routed by its users). Calling it again adds topics.
// A Redis failure is returned wrapped as domain.ErrRetryable and the registration is kept in
// memory: the heartbeat writes it again.
func (s *Session) ChannelOn(ctx context.Context, topics []domain.Topic) error {
	st := s.st
	st.chanMu.Lock()
	defer st.chanMu.Unlock()
	if s.isClosed() {
		return nil
	}
	var keys []string
	if !s.chanOn {
		s.chanOn = true
		k := userKey{s.tenant, s.user}
		st.chanUsers[k]++
		if st.chanUsers[k] == 1 {
			keys = append(keys, st.keys.userChanNodes(s.tenant, s.user))
		}
	}
	keys = append(keys, s.watchLocked(topics)...)
	return s.fail(ctx, "channel", st.addNodes(ctx, keys))
}

// Watch adds topics to those the session's channel watches; it does nothing for a session not
// on its channel. Errors as ChannelOn.
func (s *Session) Watch(ctx context.Context, topics []domain.Topic) error {
	st := s.st
	st.chanMu.Lock()
	defer st.chanMu.Unlock()
	if !s.chanOn || s.isClosed() {
		return nil
	}
	return s.fail(ctx, "channel", st.addNodes(ctx, s.watchLocked(topics)))
}

// Unwatch removes topics from those the session's channel watches: the node leaves a topic's
// chan_nodes with the last local session watching it. Errors as ChannelOn; a removal that did not
// reach Redis lapses after TTL.
func (s *Session) Unwatch(ctx context.Context, topics []domain.Topic) error {
	st := s.st
	st.chanMu.Lock()
	defer st.chanMu.Unlock()
	return s.fail(ctx, "channel", st.removeNodes(ctx, s.unwatchLocked(topics)))
}

// ChannelOff takes the session off its user's channel and stops it watching any topic.
// Logout does it too. Errors as Unwatch.
func (s *Session) ChannelOff(ctx context.Context) error {
	st := s.st
	st.chanMu.Lock()
	defer st.chanMu.Unlock()
	return s.fail(ctx, "channel", st.removeNodes(ctx, s.channelOffLocked()))
}

// Watching returns how many topics the session's channel watches.
func (s *Session) Watching() int {
	s.st.chanMu.Lock()
	defer s.st.chanMu.Unlock()
	return len(s.watching)
}

// channelOffLocked forgets the session's channel registrations and returns the keys the node
// leaves; st.chanMu is held.
func (s *Session) channelOffLocked() []string {
	if !s.chanOn {
		return nil
	}
	st := s.st
	all := make([]domain.Topic, 0, len(s.watching))
	for _, t := range s.watching {
		all = append(all, t)
	}
	keys := s.unwatchLocked(all)
	s.chanOn = false
	k := userKey{s.tenant, s.user}
	st.chanUsers[k]--
	if st.chanUsers[k] <= 0 {
		delete(st.chanUsers, k)
		keys = append(keys, st.keys.userChanNodes(s.tenant, s.user))
	}
	return keys
}

// watchLocked adds the group topics among topics that the session does not watch yet and returns
// the keys the node joins; st.chanMu is held.
func (s *Session) watchLocked(topics []domain.Topic) []string {
	st := s.st
	var keys []string
	for _, t := range topics {
		if t.Kind() != domain.TopicGroup {
			continue
		}
		if _, ok := s.watching[t.String()]; ok {
			continue
		}
		if s.watching == nil {
			s.watching = map[string]domain.Topic{}
		}
		s.watching[t.String()] = t
		k := chanTopicKey{s.tenant, t.String()}
		w := st.chanTopics[k]
		if w == nil {
			w = &watched{topic: t}
			st.chanTopics[k] = w
		}
		w.n++
		if w.n == 1 {
			keys = append(keys, st.keys.topicChanNodes(s.tenant, t))
		}
	}
	return keys
}

// unwatchLocked removes the topics the session watches among topics and returns the keys the
// node leaves; st.chanMu is held.
func (s *Session) unwatchLocked(topics []domain.Topic) []string {
	st := s.st
	var keys []string
	for _, t := range topics {
		if _, ok := s.watching[t.String()]; !ok {
			continue
		}
		delete(s.watching, t.String())
		k := chanTopicKey{s.tenant, t.String()}
		if w := st.chanTopics[k]; w != nil {
			w.n--
			if w.n <= 0 {
				delete(st.chanTopics, k)
				keys = append(keys, st.keys.topicChanNodes(s.tenant, t))
			}
		}
	}
	return keys
}

func (s *Session) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// addNodes adds this node to each zset of keys, in one round trip per heartbeatBatch keys.
func (st *Store) addNodes(ctx context.Context, keys []string) error {
	for start := 0; start < len(keys); start += heartbeatBatch {
		chunk := keys[start:min(start+heartbeatBatch, len(keys))]
		err := redisscript.Pipelined(ctx, st.rdb, func(b *redisscript.Batch) {
			for _, k := range chunk {
				b.Eval(chanAddScript, []string{k}, st.cfg.NodeID, st.cfg.TTL.Milliseconds())
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// removeNodes removes this node from each zset of keys.
func (st *Store) removeNodes(ctx context.Context, keys []string) error {
	for start := 0; start < len(keys); start += heartbeatBatch {
		chunk := keys[start:min(start+heartbeatBatch, len(keys))]
		_, err := st.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range chunk {
				p.ZRem(ctx, k, st.cfg.NodeID)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// refreshChannels writes every channel registration of the node again when TouchInterval has
// passed since the last time, or at once when force is set (Redis lost the node's keys).
func (st *Store) refreshChannels(ctx context.Context, now time.Time, force bool) {
	st.chanMu.Lock()
	defer st.chanMu.Unlock()
	if !force && now.Sub(st.chanRefreshed) < st.cfg.TouchInterval {
		return
	}
	keys := make([]string, 0, len(st.chanUsers)+len(st.chanTopics))
	for k := range st.chanUsers {
		keys = append(keys, st.keys.userChanNodes(k.tenant, k.user))
	}
	for k, w := range st.chanTopics {
		keys = append(keys, st.keys.topicChanNodes(k.tenant, w.topic))
	}
	if len(keys) == 0 {
		st.chanRefreshed = now
		return
	}
	if err := st.addNodes(ctx, keys); err != nil {
		if ctx.Err() == nil {
			st.errs.WithLabelValues("channel").Inc()
			st.log.WarnContext(ctx, "presence: refreshing channel registrations failed", "keys", len(keys), "err", err)
		}
		return // due again at the next round
	}
	st.chanRefreshed = now
}
