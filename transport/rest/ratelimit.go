package rest

import (
	"context"
	"math"
	"net/http"
	"strconv"

	"github.com/go-redis/redis_rate/v10"

	"github.com/imledger/imledger/domain"
)

// rule is one rate limit: at most perMinute requests per minute under key. A zero perMinute
// turns the rule off.
type rule struct {
	key       string
	perMinute int
}

// limit checks the rules in order against Redis (go-redis/redis_rate, GCRA). A request over a
// limit is 429 rate_limited with Retry-After. When Redis does not answer the request is refused
// with 503 retry: rate limits fail closed (DESIGN §7), so a Redis outage never opens login to
// unlimited password guessing.
func (a *API) limit(ctx context.Context, rules ...rule) error {
	for _, r := range rules {
		if r.perMinute <= 0 {
			continue
		}
		if a.limiter == nil {
			return a.fail(ctx, domain.Retryable("rate limit", errNoLimiter))
		}
		res, err := a.limiter.Allow(ctx, a.cfg.RateLimitPrefix+r.key, redis_rate.PerMinute(r.perMinute))
		if err != nil {
			return a.fail(ctx, domain.Retryable("rate limit", err))
		}
		if res.Allowed == 0 {
			e := newError(RequestID(ctx), http.StatusTooManyRequests, ReasonRateLimited, "too many attempts, slow down",
				map[string]any{"retryable": true})
			e.headers.Set("Retry-After", strconv.Itoa(int(math.Ceil(max(res.RetryAfter.Seconds(), 1)))))
			return e
		}
	}
	return nil
}

// limitLogin applies the login limits to an attempt at name from the request's client address:
//
//   - per address (LoginPerIP), whatever the names;
//   - per name and address (LoginPerNameIP): a guesser at one address is slowed down, the owner
//     at another is not;
//   - per name from every address that has not logged in to it within LoginKnownAddressTTL
//     (LoginPerName, much higher): guessing spread over many addresses is bounded, and the owner
//     at an address they logged in from before keeps getting in however hard others guess.
//
// Like every limit it fails closed: with Redis down the attempt is refused with 503 retry.
func (a *API) limitLogin(ctx context.Context, tenant domain.TenantID, name string) error {
	ip := clientIP(ctx)
	if err := a.limit(ctx, rule{"login:ip:" + ip, a.cfg.LoginPerIP},
		rule{"login:name_ip:" + tenant.String() + ":" + name + ":" + ip, a.cfg.LoginPerNameIP}); err != nil {
		return err
	}
	if a.cfg.LoginPerName <= 0 {
		return nil
	}
	if a.h.Redis == nil {
		return a.fail(ctx, domain.Retryable("rate limit", errNoLimiter))
	}
	known, err := a.h.Redis.Exists(ctx, a.knownAddressKey(tenant, name, ip)).Result()
	if err != nil {
		return a.fail(ctx, domain.Retryable("rate limit", err))
	}
	if known > 0 {
		return nil
	}
	return a.limit(ctx, rule{"login:name:" + tenant.String() + ":" + name, a.cfg.LoginPerName})
}

// rememberAddress marks the request's client address as one name logged in from, for
// LoginKnownAddressTTL. A failure only costs the exemption from the per-name limit: it is logged.
func (a *API) rememberAddress(ctx context.Context, tenant domain.TenantID, name string) {
	if a.h.Redis == nil || a.cfg.LoginKnownAddressTTL <= 0 {
		return
	}
	if err := a.h.Redis.Set(ctx, a.knownAddressKey(tenant, name, clientIP(ctx)), 1, a.cfg.LoginKnownAddressTTL).Err(); err != nil {
		a.cfg.Logger.WarnContext(ctx, "login address not remembered", "tenant_id", tenant.String(), "request_id", RequestID(ctx), "err", err)
	}
}

// knownAddressKey is the Redis key saying that name logged in from ip.
func (a *API) knownAddressKey(tenant domain.TenantID, name, ip string) string {
	return a.cfg.RateLimitPrefix + "login:known:" + tenant.String() + ":" + name + ":" + ip
}

type limiterError string

func (e limiterError) Error() string { return string(e) }

const errNoLimiter = limiterError("no rate limiter configured")
