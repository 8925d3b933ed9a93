// Package verify issues and checks one-time verification codes (register, login, reset_password,
// change_phone) sent by SMS or e-mail. Redis holds the active code of a scene and target with its
// TTL, resend window and wrong-attempt count, and limits creation with INCR + EXPIRE; the tenant's
// MySQL keeps every code's final state (consumed, expired, locked) for audit. Phone numbers and
// e-mail addresses are kept only as a keyed hash, codes only as a keyed MAC. With Redis down every
// operation fails closed with a retryable error.
package verify
