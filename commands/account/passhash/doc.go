// Package passhash hashes and verifies account passwords with argon2id in PHC string
// format. It belongs to the account commands, which are its only production user; the
// transport layer signs tokens and never sees a password hash.
package passhash
