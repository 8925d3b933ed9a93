package domain

import (
	"errors"
	"strconv"
	"time"
)

// ErrRateLimited means a request went over a rate limit and was refused before anything was
// written. Errors wrapping it are *RateLimitedError values.
var ErrRateLimited = errors.New("rate limited")

// ReasonRateLimited is the stable reason of a refusal by a rate limit (REST 429, WebSocket ctrl
// 429).
const ReasonRateLimited = "rate_limited"

// RateLimitedError is a request refused by the rate limit Limit; RetryAfter says when the same
// request may pass.
type RateLimitedError struct {
	Limit      RateLimitKind
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return "rate limited: " + string(e.Limit) + ", retry after " + e.RetryAfter.String()
}

// Unwrap makes errors.Is(err, ErrRateLimited) true.
func (e *RateLimitedError) Unwrap() error { return ErrRateLimited }

// RetryAfterSeconds is RetryAfter in whole seconds, at least 1, for a Retry-After header.
func (e *RateLimitedError) RetryAfterSeconds() int {
	s := int((e.RetryAfter + time.Second - 1) / time.Second)
	return max(s, 1)
}

// RetryAfterMillis is RetryAfter in whole milliseconds, rounded up and at least 1, for a
// retry_after_ms parameter: a wait below a millisecond is still a wait, and a client told 0
// would retry at once and be refused again.
func (e *RateLimitedError) RetryAfterMillis() int64 {
	ms := int64((e.RetryAfter + time.Millisecond - 1) / time.Millisecond)
	return max(ms, 1)
}

// RateLimitKind names one rate limit. Tenants override the node's limits by these names in their
// rate_limits setting; the names are never renamed.
type RateLimitKind string

// The rate limits. Each counts requests per minute of one subject.
const (
	RateSendUser          RateLimitKind = "send_user"           // messages sent by one user
	RateSendTopic         RateLimitKind = "send_topic"          // messages sent to one topic
	RateRESTUser          RateLimitKind = "rest_user"           // authenticated REST requests of one user
	RateRESTAPIKey        RateLimitKind = "rest_api_key"        // REST requests carrying one tenant API key
	RateWSConnectIP       RateLimitKind = "ws_connect_ip"       // WebSocket connects from one client address (node-wide)
	RateGroupCreateUser   RateLimitKind = "group_create_user"   // groups created by one user
	RateFriendRequestUser RateLimitKind = "friend_request_user" // friend requests sent by one user
)

// RateLimitKinds are the tenant-configurable rate limits, in a fixed order.
var RateLimitKinds = []RateLimitKind{RateSendUser, RateSendTopic, RateRESTUser, RateRESTAPIKey,
	RateGroupCreateUser, RateFriendRequestUser}

// MaxRateLimitPerMinute bounds every per-minute rate limit a tenant may set.
const MaxRateLimitPerMinute = 1_000_000

// RateLimits are per-minute limits by kind; 0 turns a limit off. A kind not present keeps the
// node's configured limit.
type RateLimits map[RateLimitKind]int

// Of returns the limit of kind and whether it is set.
func (r RateLimits) Of(kind RateLimitKind) (int, bool) {
	v, ok := r[kind]
	return v, ok
}

func (r RateLimits) equal(o RateLimits) bool {
	if len(r) != len(o) {
		return false
	}
	for k, v := range r {
		if w, ok := o[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// checkRateLimits validates a rate_limits setting: known kinds, 0..MaxRateLimitPerMinute.
func checkRateLimits(r RateLimits) error {
	for k, v := range r {
		known := false
		for _, kk := range RateLimitKinds {
			known = known || k == kk
		}
		if !known {
			return invalid("rate_limits."+string(k), "unknown",
				"one of send_user, send_topic, rest_user, rest_api_key, group_create_user, friend_request_user")
		}
		if v < 0 || v > MaxRateLimitPerMinute {
			return invalid("rate_limits."+string(k), "out_of_range", "0.."+strconv.Itoa(MaxRateLimitPerMinute)+" per minute")
		}
	}
	return nil
}
