// Package session records realtime sessions in the event log: Recorder appends
// session.opened.v1 and session.closed.v1 on each session's own stream, queued by the gateway and
// written in batches, so analysts can replay who was online when.
package session
