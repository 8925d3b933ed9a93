// Package files runs the life of an uploaded file (seed 004 §6.4): metadata first, then the
// bytes into object storage (gocloud.dev/blob), a completion that queues a security check on
// im.file.security, the check's verdict (a rejected file is never served again and its uploader
// is told), and the collection of files no message references after a grace period. Each state
// change is an event on the file's stream "file:<id>" before the tenant's record follows it.
package files
