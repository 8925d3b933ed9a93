// Package admin is the admin plane's command consumer (DESIGN §4 "Admin commands", §7a, seed 004
// §6.3): admin systems produce commands on im.admin.command in the event envelope, signed with a
// producer key; the consumer verifies the signature and the signing time before anything else,
// binds the command to the key's identity and tenant scope, claims each command once per
// consumer group in PostgreSQL, runs it through the same command handlers REST uses (so every
// change is an event with the key's identity and id as actor), and answers on
// im.admin.command.result. Secret payload fields travel sealed and are opened only right before
// the handler that needs them. Transient failures are retried with backoff and then
// dead-lettered, redacted, to im.dead.letter and admin_command_failures, from where
// Failures.Replay sends them again, signed by the operator, under a new event_id.
package admin
