// Package account registers users and checks their passwords, keeps the tenants' API keys, governs
// accounts (bans, revocations, the Guard every node checks tokens with) and serves what users do
// to their own accounts: login sessions (Sessions), password changes and resets, contacts bound
// for resets (SelfService).
// A registration appends user.registered.v1 (and the first public profile) to the user's stream
// in the event store; the argon2id password hash stays in the credentials table, never in an
// event. Login answers one stable ErrInvalidCredentials for an unknown login and a wrong password
// alike, after the same amount of hashing work.
package account
