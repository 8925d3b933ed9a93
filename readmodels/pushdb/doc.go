// Package pushdb keeps what offline push reminders need in the tenant's MySQL database: the
// device tokens users register, the conversations they muted, and the log of every reminder the
// push worker delivered or gave up on (migration 00007).
package pushdb
