// Package userchan keeps each user's channel (the WebSocket "me" topic): a bounded log of the
// discrete things that happen to a user (a friend request, an invitation, a removal, a block, an
// account change, a new conversation, a read mark made on another device), numbered by a
// per-user seq, in Redis, and the delivery of each new item at once to the nodes with a channel
// session of the user. Counters and last messages of conversations are state, not items: the
// gateway derives them from the messages themselves (see transport/ws), and a client re-reads
// them from the conversation list.
//
// The log is short-lived delivery state, not a read model: it keeps the last Config.LogSize
// items of a user for Config.LogTTL, under an epoch that changes when the log is lost or expires,
// so a client that catches up after more than the log keeps is told to resync (re-read its
// conversations, friend requests and invitations from the read models) instead of missing items.
package userchan
