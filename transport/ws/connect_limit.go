package ws

import (
	"errors"
	"net"
	"net/http"
	"strconv"

	"github.com/imledger/imledger/domain"
)

// admitAddress applies the per-address connect limit before the upgrade. It answers the refusals
// itself and reports whether the connect may go on.
func (g *Gateway) admitAddress(w http.ResponseWriter, r *http.Request) bool {
	if g.deps.Limiter == nil {
		return true
	}
	ip := r.RemoteAddr
	if host, _, err := net.SplitHostPort(ip); err == nil {
		ip = host
	}
	err := g.deps.Limiter.Allow(r.Context(), domain.TenantID{}, domain.RateWSConnectIP, ip)
	var limited *domain.RateLimitedError
	switch {
	case err == nil:
		return true
	case errors.As(err, &limited):
		g.metrics.refused.WithLabelValues("rate_limited").Inc()
		w.Header().Set("Retry-After", strconv.Itoa(limited.RetryAfterSeconds()))
		http.Error(w, ReasonRateLimited, http.StatusTooManyRequests)
	default:
		g.metrics.refused.WithLabelValues("rate_limit_unavailable").Inc()
		g.log.WarnContext(r.Context(), "ws: connect limit unavailable, refusing", "remote", r.RemoteAddr, "err", err)
		w.Header().Set("Retry-After", "1")
		http.Error(w, ReasonRetry, http.StatusServiceUnavailable)
	}
	return false
}
