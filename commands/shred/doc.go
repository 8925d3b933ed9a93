// Package shred keeps the data keys of crypto-shredding (DESIGN §7a): one AES-256-GCM key per
// tenant, author and month, stored in PostgreSQL wrapped by the tenant key of a keeper
// (gocloud.dev/secrets), created on first use and cached per node. Its Keyring seals and opens
// the sealed values of domain (domain.Sealer, domain.Opener) and destroys a user's keys on
// erasure, after which everything they sealed reads as erased.
package shred
