// Package actiontoken issues one-time tokens for sensitive actions (reset a password, join a
// group by invite link, log in with an enterprise code). Redis answers the hot check of an
// active token; the tenant's MySQL row is a state machine (active → consumed | revoked) whose
// conditional update is the final word, so a token is consumed exactly once however many
// consumers race. Only the token's SHA-256 is stored. With Redis down every operation fails
// closed with a retryable error.
package actiontoken
