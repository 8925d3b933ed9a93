// Package ratelimit holds the per-tenant rate limits of the edges: sends per user and per topic,
// REST requests per user and per API key, WebSocket connects per client address, group creation
// and friend requests per user. Counting is go-redis/redis_rate (GCRA) in Redis, so every node
// shares the limits; a tenant's rate_limits setting overrides the node's limits. It fails closed:
// when Redis does not answer, the request is refused with a retryable error.
package ratelimit
