// Package tokendb keeps im_action_tokens, the read model of the action token events
// (action_token.issued.v1, consumed, revoked, unconsumed on im.audit.event) in the tenant's MySQL
// database: one row per token with its state, for audit and for rebuilds. The token streams
// decide; commands/actiontoken applies each event it appends right away (so the row is current
// when its call returns) and the action-tokens projection applies them again, idempotently.
package tokendb
