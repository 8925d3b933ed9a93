// Package auth issues and verifies the signed, expiring access tokens that carry a principal
// (tenant and user). Passwords are hashed by commands/account/passhash. Tokens are HS256 JWTs signed with one
// of several configured keys, named by a key id so keys can be rotated without logging anyone out.
package auth
