// Package actiontoken issues one-time tokens for sensitive actions (reset a password, join a
// group by invite link, log in with an enterprise code). Each token has a stream of its own
// (atoken:<token id>, the id derived from the token's SHA-256): action_token.issued.v1, then
// consumed, revoked or unconsumed (a consumption given back) on im.audit.event. The stream is the
// final word: a consumption is appended at the version the token was read at, so of any number of
// racing consumers exactly one wins. Redis answers the hot check of an active token; the tenant's
// im_action_tokens is the read model of the events (written right after each append and by the
// action-tokens projection). Only the token's SHA-256 is recorded. With Redis down every
// operation fails closed with a retryable error.
package actiontoken
