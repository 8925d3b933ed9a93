// Package admintrust is the trust contract of the admin plane (DESIGN §7a): how a producer signs
// an im.admin.command record and seals the secret fields of its payload, and how the consumer
// verifies the record, binds the command to the signing key's identity and opens a secret right
// before the handler that needs it. It is computation on bytes and keys with the standard
// library's crypto (Ed25519, HMAC-SHA-256, HPKE), no I/O, so producers and the consumer share it.
package admintrust
