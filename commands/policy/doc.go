// Package policy is the send-path permission check: may this user post to this topic now? It
// answers from an in-process cache of folded group, membership and relation states, so a send
// costs no database round trip; command handlers and other nodes invalidate the cache, and a
// short TTL bounds how stale an answer can be when an invalidation is lost.
package policy
