// Package push sends offline reminders (seed 000 "离线 Push 口子"). The Producer hears every
// committed message and puts a task on im.message.push for each recipient who is offline, has
// not muted the conversation (unless @mentioned) and has no unanswered reminder for it; a task
// carries only {type, topic, seq, tenant_id} and the recipient, never the content. The Worker
// consumes the tasks in its own consumer group, dedupes them, coalesces a user's tasks within a
// window into one reminder with a count, and delivers it through a JPush-compatible or a webhook
// provider with timeouts, retries and a record of every outcome. Push never touches message
// storage: a reminder that fails is logged, counted and recorded, nothing more.
package push
