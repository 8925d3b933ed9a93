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

type limiterError string

func (e limiterError) Error() string { return string(e) }

const errNoLimiter = limiterError("no rate limiter configured")
