package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/imledger/imledger/domain"
)

// Config holds the node's per-minute limits (0 turns a limit off) and the Redis key prefix.
type Config struct {
	// KeyPrefix starts every rate-limit key; keys are
	// rate:<KeyPrefix><tenant>:rl:<kind>:{<subject>} (redis_rate adds "rate:"). Default "im:".
	KeyPrefix string `koanf:"key_prefix"`
	// SendPerUser is how many messages one user may send per minute, over REST and WebSocket
	// together. Default 600.
	SendPerUser int `koanf:"send_per_user"`
	// SendPerTopic is how many messages one topic may receive per minute. Default 3000.
	SendPerTopic int `koanf:"send_per_topic"`
	// RESTPerUser is how many authenticated REST requests one user may make per minute.
	// Default 1200.
	RESTPerUser int `koanf:"rest_per_user"`
	// RESTPerAPIKey is how many REST requests may carry one tenant API key per minute.
	// Default 60000.
	RESTPerAPIKey int `koanf:"rest_per_api_key"`
	// WSConnectPerIP is how many WebSocket connects one client address may open per minute. It is
	// node-wide: the tenant is known only after login. Default 120.
	WSConnectPerIP int `koanf:"ws_connect_per_ip"`
	// GroupCreatePerUser is how many groups one user may create per minute. Default 10.
	GroupCreatePerUser int `koanf:"group_create_per_user"`
	// FriendRequestPerUser is how many friend requests one user may send per minute. Default 30.
	FriendRequestPerUser int `koanf:"friend_request_per_user"`
}

func (c *Config) setDefaults() {
	if c.KeyPrefix == "" {
		c.KeyPrefix = "im:"
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.SendPerUser, 600)
	def(&c.SendPerTopic, 3000)
	def(&c.RESTPerUser, 1200)
	def(&c.RESTPerAPIKey, 60000)
	def(&c.WSConnectPerIP, 120)
	def(&c.GroupCreatePerUser, 10)
	def(&c.FriendRequestPerUser, 30)
}

// limitOf is the node's limit of kind.
func (c Config) limitOf(kind domain.RateLimitKind) int {
	switch kind {
	case domain.RateSendUser:
		return c.SendPerUser
	case domain.RateSendTopic:
		return c.SendPerTopic
	case domain.RateRESTUser:
		return c.RESTPerUser
	case domain.RateRESTAPIKey:
		return c.RESTPerAPIKey
	case domain.RateWSConnectIP:
		return c.WSConnectPerIP
	case domain.RateGroupCreateUser:
		return c.GroupCreatePerUser
	case domain.RateFriendRequestUser:
		return c.FriendRequestPerUser
	}
	return 0
}

// Validate reports every problem of c, with defaults applied, joined into one error. A negative
// limit turns it off.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	for _, k := range append([]domain.RateLimitKind{domain.RateWSConnectIP}, domain.RateLimitKinds...) {
		if v := c.limitOf(k); v > domain.MaxRateLimitPerMinute {
			errs = append(errs, fmt.Errorf("rate_limit: %s must be at most %d per minute", k, domain.MaxRateLimitPerMinute))
		}
	}
	return errors.Join(errs...)
}

// Settings gives a tenant's overrides of the node's limits (the tenant's rate_limits setting).
// An unknown tenant has none. It must not do I/O for a tenant it knows: it runs on every request.
type Settings interface {
	RateLimits(ctx context.Context, tenant domain.TenantID) domain.RateLimits
}

// Limiter checks requests against the limits. It is safe for concurrent use.
type Limiter struct {
	cfg      Config
	rl       *redis_rate.Limiter
	settings Settings
	limited  *prometheus.CounterVec
	failed   prometheus.Counter
	trips    *prometheus.CounterVec // send-path checks that went to Redis, by path
	waited   prometheus.Counter     // trips{path="send"}: a send waited for the round trip
	ahead    prometheus.Counter     // trips{path="ahead"}: a lease counted in the background
	batch    *batcher
	leases   leases
}

// New returns a Limiter over rdb. settings may be nil (the node's limits for every tenant);
// reg may be nil (no metrics registered).
func New(rdb redis.UniversalClient, cfg Config, settings Settings, reg prometheus.Registerer) (*Limiter, error) {
	if rdb == nil {
		return nil, errors.New("ratelimit: a Redis client is required")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	l := &Limiter{cfg: cfg, rl: redis_rate.NewLimiter(rdb), settings: settings, batch: newBatcher(rdb, 2),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imledger_rate_limited_total",
			Help: "Requests refused by a rate limit, by limit."}, []string{"limit"}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "imledger_rate_limit_errors_total",
			Help: "Rate-limit checks that failed because Redis did not answer; the requests were refused (fail closed)."}),
		trips: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "imledger_rate_limit_send_checks_total",
			Help: "Send-limit checks that went to Redis: path=send made a send wait, path=ahead counted a busy sender's or topic's next lease in the background."},
			[]string{"path"}),
	}
	// The send path counts on these without a label lookup per send.
	l.waited, l.ahead = l.trips.WithLabelValues("send"), l.trips.WithLabelValues("ahead")
	if reg != nil {
		for _, c := range []prometheus.Collector{l.limited, l.failed, l.trips} {
			if err := reg.Register(c); err != nil {
				var are prometheus.AlreadyRegisteredError
				if !errors.As(err, &are) {
					return nil, fmt.Errorf("ratelimit: register metrics: %w", err)
				}
			}
		}
	}
	return l, nil
}

// Close stops the workers of AllowSend; checks still queued are refused as retryable.
func (l *Limiter) Close() { l.batch.close() }

// AllowSend counts one send of user to topic against tenant's send_user and send_topic limits.
// A busy sender or topic is counted ahead: one round trip counts its demand of the next two
// seconds (what its sends took since the last count, at their rate; at most two seconds' share of
// the limit, at most 128), which this node then uses without asking Redis for two seconds, so the
// limit only ever gets stricter (unused requests are dropped); once three quarters of it are used,
// the next lease is counted in the background, so a busy sender does not wait for Redis at all.
// Round trips are pipelined with the sends checked at the same time (background counts linger a
// few milliseconds for company). It returns nil, a *domain.RateLimitedError (send_user first when
// both refuse), or a retryable error when Redis does not answer (fail closed).
func (l *Limiter) AllowSend(ctx context.Context, tenant domain.TenantID, user, topic string) error {
	now := time.Now()
	var (
		checks []*check
		taken  [2]leaseKey // of the leases, for a send refused by the other limit
		nTaken int
	)
	for _, c := range []struct {
		kind    domain.RateLimitKind
		subject string
	}{{domain.RateSendUser, user}, {domain.RateSendTopic, topic}} {
		limit := l.Limit(ctx, tenant, c.kind)
		if limit <= 0 {
			continue
		}
		key := leaseKey{tenant, c.kind, c.subject}
		ok, n := l.leases.take(key, limit, now)
		if ok {
			taken[nTaken] = key
			nTaken++
			if n > 0 {
				l.refill(key, c.kind, limit, n)
			}
			continue
		}
		// n 0: a lease is being counted, this send counts itself
		checks = append(checks, &check{ctx: ctx, lease: key, key: key.redisKey(l.cfg.KeyPrefix), kind: c.kind, limit: limit, n: max(n, 1), whole: n > 0})
	}
	if len(checks) == 0 {
		return nil
	}
	l.waited.Inc()
	errs := l.batch.do(checks...)
	var refused error
	for i, err := range errs {
		c := checks[i]
		switch {
		case c.whole && err == nil:
			l.leases.counted(c.lease, c.got, 1, c.limit, now)
		case c.whole:
			l.leases.countFailed(c.lease)
		}
		var limited *domain.RateLimitedError
		switch {
		case err == nil:
		case errors.As(err, &limited):
			l.limited.WithLabelValues(string(c.kind)).Inc()
		default:
			l.failed.Inc()
		}
		if err != nil && refused == nil {
			refused = err
		}
	}
	if refused != nil {
		// The send does not happen: what it took of this node's leases goes back.
		for _, key := range taken[:nTaken] {
			l.leases.give(key, now)
		}
		for i, c := range checks {
			if errs[i] == nil {
				l.leases.give(c.lease, now)
			}
		}
	}
	return refused
}

// refill counts key's next lease ahead, off the send path: a busy sender or topic keeps sending
// on its lease while the round trip is under way. A refused or failed refill only ends it; the
// send that finds the lease empty asks Redis itself and gets the answer.
func (l *Limiter) refill(key leaseKey, kind domain.RateLimitKind, limit, n int) {
	l.ahead.Inc()
	l.batch.later(&check{ctx: context.Background(), lease: key, key: key.redisKey(l.cfg.KeyPrefix), kind: kind, limit: limit, n: n, then: func(c *check, err error) {
		if err != nil {
			l.leases.countFailed(key)
			return
		}
		l.leases.counted(key, c.got, 0, limit, time.Now())
	}})
}

// Limit returns tenant's per-minute limit of kind: the tenant's setting when it has one, else the
// node's. 0 or less means off.
func (l *Limiter) Limit(ctx context.Context, tenant domain.TenantID, kind domain.RateLimitKind) int {
	if l.settings != nil && !tenant.IsZero() {
		if v, ok := l.settings.RateLimits(ctx, tenant).Of(kind); ok {
			return v
		}
	}
	return l.cfg.limitOf(kind)
}

// Allow counts one request of subject against tenant's limit of kind. It returns nil when the
// request may go on, a *domain.RateLimitedError when it is over the limit, and a retryable error
// when Redis did not answer (fail closed). A zero tenant is node-wide (WSConnectIP).
func (l *Limiter) Allow(ctx context.Context, tenant domain.TenantID, kind domain.RateLimitKind, subject string) error {
	limit := l.Limit(ctx, tenant, kind)
	if limit <= 0 {
		return nil
	}
	res, err := l.rl.Allow(ctx, l.key(tenant, kind, subject), redis_rate.PerMinute(limit))
	if err != nil {
		l.failed.Inc()
		return domain.Retryable("rate limit "+string(kind), err)
	}
	if res.Allowed == 0 {
		l.limited.WithLabelValues(string(kind)).Inc()
		return &domain.RateLimitedError{Limit: kind, RetryAfter: max(res.RetryAfter, time.Millisecond)}
	}
	return nil
}

func (l *Limiter) key(tenant domain.TenantID, kind domain.RateLimitKind, subject string) string {
	t := "_node"
	if !tenant.IsZero() {
		t = tenant.String()
	}
	return l.cfg.KeyPrefix + t + ":rl:" + string(kind) + ":{" + subject + "}"
}
