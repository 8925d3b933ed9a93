package presence

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
	"github.com/imledger/imledger/internal/smallmap"
)

// Session is one connection's presence. Its methods are safe for concurrent use; after Logout
// they do nothing.
//
// Redis failures are returned wrapped as domain.ErrRetryable and counted, but never undo the
// in-memory state: the next refresh (Store.Run's, or Touch's without Run) writes the whole
// session again, so presence heals once Redis is back.
type Session struct {
	st     *Store
	tenant domain.TenantID
	user   domain.UserID
	id     string
	ua     string

	// wmu orders the session's Redis writes: a refresh holds it from due to the end of its round
	// trip, Touch, Join, Leave and Logout for theirs, so a refresh never lands after the leave or
	// logout it raced (which made the user online again for a whole TTL).
	wmu sync.Mutex

	mu        sync.Mutex
	topics    smallmap.Map[string, domain.Topic] // by name
	lastTouch time.Time
	closed    bool

	// The session's channel registrations (channel.go), guarded by Store.chanMu.
	chanOn   bool
	watching map[string]domain.Topic // group topics the channel watches, by name
}

// LoginInfo describes a session that has just authenticated.
type LoginInfo struct {
	Tenant    domain.TenantID
	User      domain.UserID
	SessionID string // unique per connection
	UA        string // client user agent, stored for diagnostics; may be empty
}

// Login marks the session online: the user's hash and sessions, and this node's user set. It
// always returns a usable Session; a non-nil error means Redis was not written (the next refresh
// tries again).
func (st *Store) Login(ctx context.Context, in LoginInfo) (*Session, error) {
	s := &Session{st: st, tenant: in.Tenant, user: in.User, id: in.SessionID, ua: in.UA,
		lastTouch: time.Now()}
	st.addLocalUser(userKey{in.Tenant, in.User})
	st.addSession(s)
	err := redisscript.Pipelined(ctx, st.rdb, func(b *redisscript.Batch) {
		s.writeOnline(ctx, b, st.cfg.NodeID, in.UA)
	})
	return s, s.fail(ctx, "login", err)
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// writeOnline queues the user's online script and this node's user set.
func (s *Session) writeOnline(ctx context.Context, b *redisscript.Batch, node, ua string) {
	st := s.st
	b.Eval(onlineScript, []string{st.keys.user(s.tenant, s.user), st.keys.userSessions(s.tenant, s.user)},
		s.id, st.cfg.TTL.Milliseconds(), st.cfg.LastSeenTTL.Milliseconds(), node, ua)
	nodeUsers := st.keys.nodeUsers(s.tenant, st.cfg.NodeID)
	b.P.SAdd(ctx, nodeUsers, s.user.String())
	b.P.PExpire(ctx, nodeUsers, 3*st.cfg.TTL)
}

// Touch refreshes the session's TTLs and those of its topic memberships. It is cheap to call on
// every inbound frame: it writes at most once per TouchInterval and otherwise returns at once.
// While Store.Run runs it writes nothing: Run refreshes every session of the node, those whose
// clients send frames too, up to 256 in one Redis round trip, where Touch would spend one round
// trip per session (10,000 clients pinging every 20 s made 500 Touch round trips a second).
func (s *Session) Touch(ctx context.Context) error {
	if s.st.running.Load() > 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	topics, due := s.due(time.Now())
	if !due {
		return nil
	}
	err := redisscript.Pipelined(ctx, s.st.rdb, func(b *redisscript.Batch) { s.writeRefresh(ctx, b, topics) })
	return s.fail(ctx, "touch", err)
}

// due reports whether the session should be refreshed at now, and if so marks it refreshed and
// returns its topics.
func (s *Session) due(now time.Time) ([]domain.Topic, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || now.Sub(s.lastTouch) < s.st.cfg.TouchInterval {
		return nil, false
	}
	s.lastTouch = now
	topics := make([]domain.Topic, 0, s.topics.Len())
	for _, t := range s.topics.All() {
		topics = append(topics, t)
	}
	return topics, true
}

// markDue makes the session due for its next refresh: Redis missed a write of it.
func (s *Session) markDue() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastTouch = time.Time{}
}

// writeRefresh queues the session's online script, node set and topic memberships.
func (s *Session) writeRefresh(ctx context.Context, b *redisscript.Batch, topics []domain.Topic) {
	s.writeOnline(ctx, b, s.st.cfg.NodeID, s.ua)
	for _, t := range topics {
		s.writeJoin(ctx, b, t)
	}
}

// Join records the session as an online member of topic on this node. Joining a topic twice
// refreshes it.
func (s *Session) Join(ctx context.Context, topic domain.Topic) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	if !s.topics.Has(topic.String()) {
		s.topics.Set(topic.String(), topic)
		s.st.addLocalTopic(topicUserKey{s.tenant, topic.String(), s.user})
	}
	s.mu.Unlock()
	err := redisscript.Pipelined(ctx, s.st.rdb, func(b *redisscript.Batch) { s.writeJoin(ctx, b, topic) })
	return s.fail(ctx, "join", err)
}

func (s *Session) writeJoin(ctx context.Context, b *redisscript.Batch, topic domain.Topic) {
	st := s.st
	b.Eval(joinScript, st.keys.topicKeys(s.tenant, topic, st.cfg.NodeID),
		s.user.String(), st.cfg.NodeID, st.cfg.TTL.Milliseconds())
}

// Leave removes the session from topic's online members. The user stays a member on this node
// while another local session of theirs is in the topic, and in the topic's members while
// another node has them.
func (s *Session) Leave(ctx context.Context, topic domain.Topic) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	ok := s.topics.Delete(topic.String())
	s.mu.Unlock()
	if !ok || !s.st.dropLocalTopic(topicUserKey{s.tenant, topic.String(), s.user}) {
		return nil
	}
	err := redisscript.Pipelined(ctx, s.st.rdb, func(b *redisscript.Batch) { s.writeLeave(ctx, b, topic) })
	return s.fail(ctx, "leave", err)
}

func (s *Session) writeLeave(ctx context.Context, b *redisscript.Batch, topic domain.Topic) {
	st := s.st
	b.Eval(leaveScript, st.keys.topicKeys(s.tenant, topic, st.cfg.NodeID),
		s.user.String(), st.cfg.NodeID, st.keys.topicNodePrefix(s.tenant, topic), topicNodeSuffix)
}

// OnlineIn reports, for each of topics, whether the session's user is a live online member of it
// on any node, in one Redis round trip. It answers after Leave and Logout too: then a true means
// another session of the user is still in the topic, so the last of them to leave can tell.
// Errors are Redis errors wrapped as domain.ErrRetryable.
func (s *Session) OnlineIn(ctx context.Context, topics []domain.Topic) ([]bool, error) {
	st := s.st
	cmds := make([]*redis.Cmd, len(topics))
	err := redisscript.Pipelined(ctx, st.rdb, func(b *redisscript.Batch) {
		for i, t := range topics {
			cmds[i] = b.EvalRO(memberScript, []string{st.keys.topicMembers(s.tenant, t)}, s.user.String())
		}
	})
	if err != nil {
		return nil, domain.Retryable("presence: topic members", err)
	}
	out := make([]bool, len(topics))
	for i, c := range cmds {
		n, err := c.Int()
		if err != nil {
			return nil, domain.Retryable("presence: topic members", err)
		}
		out[i] = n == 1
	}
	return out, nil
}

// Logout leaves every topic and removes the session; the user's last session marks them offline
// with last_seen_at. Logout is idempotent.
func (s *Session) Logout(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var leave []domain.Topic
	for _, t := range s.topics.All() {
		if s.st.dropLocalTopic(topicUserKey{s.tenant, t.String(), s.user}) {
			leave = append(leave, t)
		}
	}
	s.topics = smallmap.Map[string, domain.Topic]{}
	s.mu.Unlock()
	st := s.st
	st.dropSession(s)
	lastHere := st.dropLocalUser(userKey{s.tenant, s.user})
	err := redisscript.Pipelined(ctx, st.rdb, func(b *redisscript.Batch) {
		for _, t := range leave {
			s.writeLeave(ctx, b, t)
		}
		b.Eval(offlineScript, []string{st.keys.user(s.tenant, s.user), st.keys.userSessions(s.tenant, s.user)},
			s.id, st.cfg.LastSeenTTL.Milliseconds())
		if lastHere {
			b.P.SRem(ctx, st.keys.nodeUsers(s.tenant, st.cfg.NodeID), s.user.String())
		}
	})
	if cerr := s.ChannelOff(ctx); cerr != nil && err == nil {
		return cerr
	}
	return s.fail(ctx, "logout", err)
}

// fail counts a Redis failure and wraps it as retryable; nil stays nil. A failed login or join
// makes the session due, so the next refresh writes it again (Store.Run's next round, within a
// second, or without Run the next Touch) rather than TouchInterval later.
func (s *Session) fail(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	s.st.errs.WithLabelValues(op).Inc()
	if op == "login" || op == "join" {
		s.markDue()
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return domain.Retryable("presence: "+op+" of session "+s.id+" user "+strconv.FormatInt(s.user.Int64(), 10), err)
}
