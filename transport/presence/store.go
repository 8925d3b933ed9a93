package presence

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/internal/redisscript"
)

// Status is a user's presence status.
type Status string

// The statuses. StatusUnknown answers a query Redis could not answer (DESIGN §7).
const (
	StatusOnline  Status = "online"
	StatusOffline Status = "offline"
	StatusUnknown Status = "unknown"
)

// Presence is a user's presence as any node sees it.
type Presence struct {
	Status Status
	// Online is true while the user has at least one live session on any node.
	Online bool
	// LastSeen is the user's last activity while online, the time the last session closed (or
	// lapsed, to within TouchInterval) while offline, and zero when never seen or unknown.
	LastSeen time.Time
	// Sessions counts the user's live sessions over all nodes.
	Sessions int
	// Node is the node of the user's latest login; empty when unknown.
	Node string
}

// Deps are the collaborators of a Store.
type Deps struct {
	Redis      redis.UniversalClient // required
	Logger     *slog.Logger          // default discards
	Registerer prometheus.Registerer // optional: imledger_presence_redis_errors_total{op}
}

// Store reads and writes presence for one node. It is safe for concurrent use.
//
// Sessions of this node are written through the *Session that Login returns. The Store counts
// this node's sessions per user and per topic in memory, so a user with two sessions here leaves
// a topic (or the node's user set) only with the last of them.
type Store struct {
	cfg  Config
	rdb  redis.UniversalClient
	log  *slog.Logger
	keys keys
	errs *prometheus.CounterVec

	running atomic.Int32 // Runs refreshing the sessions: Touch then leaves it to them

	mu          sync.Mutex
	sessions    map[*Session]struct{}
	localUsers  map[userKey]int
	localTopics map[topicUserKey]int

	// Channel registrations (channel.go), guarded by chanMu, which is held across their Redis
	// writes so that a removal never lands after a newer addition of the same key.
	chanMu        sync.Mutex
	chanUsers     map[userKey]int           // local channel sessions per user
	chanTopics    map[chanTopicKey]*watched // local channel sessions watching each group topic
	chanRefreshed time.Time                 // when the heartbeat last wrote them all
}

type userKey struct {
	tenant domain.TenantID
	user   domain.UserID
}

type topicUserKey struct {
	tenant domain.TenantID
	topic  string
	user   domain.UserID
}

// New validates cfg and returns a Store. It does not touch Redis.
func New(deps Deps, cfg Config) (*Store, error) {
	cfg.setDefaults()
	var errs []error
	if deps.Redis == nil {
		errs = append(errs, errors.New("presence: Redis is required"))
	}
	errs = append(errs, cfg.Validate())
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		cfg: cfg, rdb: deps.Redis, log: deps.Logger, keys: keys{prefix: cfg.KeyPrefix},
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "imledger_presence_redis_errors_total",
			Help: "Presence operations that failed because Redis did not answer, by operation.",
		}, []string{"op"}),
		sessions:    map[*Session]struct{}{},
		localUsers:  map[userKey]int{},
		localTopics: map[topicUserKey]int{},
		chanUsers:   map[userKey]int{},
		chanTopics:  map[chanTopicKey]*watched{},
	}
	for _, op := range redisOps {
		s.errs.WithLabelValues(op) // exported at 0 from the start
	}
	if deps.Registerer != nil {
		if err := deps.Registerer.Register(s.errs); err != nil {
			return nil, fmt.Errorf("presence: register metrics: %w", err)
		}
	}
	return s, nil
}

// redisOps are the op labels of imledger_presence_redis_errors_total.
var redisOps = []string{"channel", "get", "heartbeat", "join", "leave", "login", "logout", "touch"}

// NodeID returns this node's id.
func (s *Store) NodeID() string { return s.cfg.NodeID }

// Config returns the configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// Get returns a user's presence from Redis, whichever node the user is on. When Redis does not
// answer, Get logs and counts the failure and returns Status "unknown" with a nil error (DESIGN
// §7); it fails only when ctx ends.
func (s *Store) Get(ctx context.Context, tenant domain.TenantID, user domain.UserID) (Presence, error) {
	res, err := getScript.RunRO(ctx, s.rdb, []string{s.keys.user(tenant, user), s.keys.userSessions(tenant, user)}).Slice()
	if err != nil || len(res) != 6 {
		if ctx.Err() != nil {
			return Presence{}, ctx.Err()
		}
		s.failed(ctx, "get", tenant, err)
		return Presence{Status: StatusUnknown}, nil
	}
	return parsePresence(res), nil
}

// parsePresence reads the answer of the get script.
func parsePresence(res []any) Presence {
	live, _ := res[0].(int64)
	p := Presence{Online: live > 0, Sessions: int(live), Status: StatusOffline}
	p.Node, _ = res[2].(string)
	lastActive, lastSeen := millis(res[3]), millis(res[4])
	switch {
	case p.Online:
		p.Status, p.LastSeen = StatusOnline, lastActive
	case !lastSeen.IsZero() && !lastSeen.Before(lastActive):
		p.LastSeen = lastSeen
	default:
		// The sessions lapsed without a logout (a crashed node): last activity is the best guess.
		p.LastSeen = lastActive
	}
	if !p.Online {
		p.Node = ""
	}
	return p
}

// TopicRef names a topic of a tenant.
type TopicRef struct {
	Tenant domain.TenantID
	Topic  domain.Topic
	// Channel adds the nodes with per-user channel sessions that the topic's messages concern:
	// for a group topic the nodes whose channel sessions watch it, for a 1:1 topic the nodes
	// with a channel session of either of its two users (see channel.go).
	Channel bool
}

// NodesForTopic returns the nodes with live online members of a topic, this node included when
// it has some. Errors are Redis errors wrapped as domain.ErrRetryable.
func (s *Store) NodesForTopic(ctx context.Context, tenant domain.TenantID, topic domain.Topic) ([]string, error) {
	nodes, err := s.NodesForTopics(ctx, []TopicRef{{Tenant: tenant, Topic: topic}})
	if err != nil {
		return nil, err
	}
	return nodes[0], nil
}

// NodesForTopics is NodesForTopic for several topics in one Redis round trip: nodes[i] are those
// of refs[i], each node once, and with refs[i].Channel also the nodes with channel sessions the
// topic's messages concern.
func (s *Store) NodesForTopics(ctx context.Context, refs []TopicRef) (nodes [][]string, err error) {
	var read func() ([][]string, error)
	err = redisscript.Pipelined(ctx, s.rdb, func(b *redisscript.Batch) { read = s.QueueNodesForTopics(b, refs) })
	if err != nil {
		return nil, domain.Retryable("presence: nodes for topic", err)
	}
	return read()
}

// QueueNodesForTopics queues NodesForTopics' reads on b, a round trip another caller makes;
// read, called after it, returns what NodesForTopics would.
func (s *Store) QueueNodesForTopics(b *redisscript.Batch, refs []TopicRef) (read func() ([][]string, error)) {
	cmds := make([][]*redis.Cmd, len(refs))
	for i, r := range refs {
		keys := []string{s.keys.topicNodes(r.Tenant, r.Topic)}
		if r.Channel && r.Topic.Kind() == domain.TopicGroup {
			keys = append(keys, s.keys.topicChanNodes(r.Tenant, r.Topic))
		}
		cmds[i] = append(cmds[i], b.EvalRO(nodesScript, keys))
		if r.Channel && r.Topic.Kind() == domain.TopicDirect {
			a, c := r.Topic.Parties()
			for _, u := range []domain.UserID{a, c} { // another slot each: a script of its own
				cmds[i] = append(cmds[i], b.EvalRO(nodesScript, []string{s.keys.userChanNodes(r.Tenant, u)}))
			}
		}
	}
	return func() ([][]string, error) {
		nodes := make([][]string, len(refs))
		for i, cs := range cmds {
			for j, c := range cs {
				list, err := c.StringSlice()
				if err != nil {
					return nil, domain.Retryable("presence: nodes for topic", err)
				}
				if j == 0 {
					nodes[i] = list
					continue
				}
				for _, n := range list {
					if !slices.Contains(nodes[i], n) {
						nodes[i] = append(nodes[i], n)
					}
				}
			}
		}
		return nodes, nil
	}
}

// failed logs and counts a Redis failure of op.
func (s *Store) failed(ctx context.Context, op string, tenant domain.TenantID, err error) {
	s.errs.WithLabelValues(op).Inc()
	s.log.WarnContext(ctx, "presence: redis failed", "op", op, "tenant_id", tenant.String(), "err", err)
}

// millis parses a Unix-milliseconds field; anything else is the zero time.
func millis(v any) time.Time {
	s, ok := v.(string)
	if !ok {
		return time.Time{}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

func (s *Store) addSession(sess *Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions[sess] = struct{}{}
}

func (s *Store) dropSession(sess *Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sess)
}

// addLocalUser counts a session of user on this node and reports whether it is the first.
func (s *Store) addLocalUser(k userKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.localUsers[k]++
	return s.localUsers[k] == 1
}

// dropLocalUser uncounts a session and reports whether it was the last.
func (s *Store) dropLocalUser(k userKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.localUsers[k]--
	if s.localUsers[k] > 0 {
		return false
	}
	delete(s.localUsers, k)
	return true
}

// addLocalTopic counts a session of user in topic and reports whether it is the first here.
func (s *Store) addLocalTopic(k topicUserKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.localTopics[k]++
	return s.localTopics[k] == 1
}

// dropLocalTopic uncounts a session of user in topic and reports whether it was the last here.
func (s *Store) dropLocalTopic(k topicUserKey) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.localTopics[k]--
	if s.localTopics[k] > 0 {
		return false
	}
	delete(s.localTopics, k)
	return true
}
