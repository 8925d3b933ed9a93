// Package admin is the admin plane's command consumer (DESIGN §4 "Admin commands", seed 004
// §6.3): admin systems produce commands on im.admin.command in the event envelope; the consumer
// checks tenant, actor and command type, claims each command once per consumer group in
// PostgreSQL, runs it through the same command handlers REST uses (so every change is an event
// with the administrator as actor), and answers on im.admin.command.result. Transient failures
// are retried with backoff and then dead-lettered to im.dead.letter and admin_command_failures,
// from where Failures.Replay sends them again under a new event_id.
package admin
