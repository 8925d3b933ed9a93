// Package ratelimit holds the per-tenant rate limits of the edges: sends per user and per topic,
// REST requests per user and per API key, WebSocket connects per client address, group creation
// and friend requests per user. Counting is GCRA in Redis, so every node shares the limits:
// go-redis/redis_rate for the request limits, a pipelined and leased variant for the send path
// (see Limiter.AllowSend). A tenant's rate_limits setting overrides the node's limits. It fails
// closed: when Redis does not answer, the request is refused with a retryable error.
package ratelimit
