// Types of the SDK's public API and of the protocol frames it reads (see /asyncapi.json).
// This module holds type definitions only.

/**
 * @typedef {'idle'|'connecting'|'authenticating'|'ready'|'waiting'|'closed'} ConnectionState
 * idle: not started, or stopped by disconnect(); connecting: opening the socket and saying hi;
 * authenticating: logging in; ready: logged in, frames flow; waiting: the connection was lost and
 * the next attempt waits for its backoff (or for the network); closed: for good (close(), or a
 * refusal a new connection cannot fix: a ban, a suspended tenant, a token nobody refreshed).
 */

/**
 * @typedef {object} StateChange
 * @property {ConnectionState} state the new state
 * @property {ConnectionState} previous the state before
 * @property {number} attempt connection attempts since the last successful login (0 on the first)
 * @property {string} [reason] why: e.g. "connection lost", "ping timeout", "offline", a refusal's reason
 * @property {number} [delayMs] waiting: the pause before the next attempt (absent while waiting for the network)
 */

/**
 * @typedef {object} Session
 * @property {string} sessionId the server's id of the session (hi's sid)
 * @property {string} tenant
 * @property {string} user the user id
 * @property {string} expires when the token (and so the session) expires, RFC 3339
 * @property {boolean} reconnected false on the first login of the client, true after a reconnect
 */

/**
 * @typedef {object} Head
 * @property {string[]} [mentions] user ids the message mentions
 * @property {boolean} [mention_all] the message mentions everyone
 * @property {string} [reply_seq]
 * @property {string} [root_seq]
 * @property {string[]} [files] ids of uploaded files the message carries
 */

/**
 * @typedef {'text'|'image'|'file'|'audio'|'video'|'system'} MsgType
 */

/**
 * A message of a topic, from a live data frame or from history.
 *
 * @typedef {object} Message
 * @property {string} topic
 * @property {string} seq its seq in the topic, a decimal string
 * @property {string} from the sender's user id
 * @property {string} ts when it was sent, RFC 3339 with milliseconds
 * @property {MsgType} msgType
 * @property {unknown} [content] absent when recalled or blocked
 * @property {Head} [head]
 * @property {string} version the content version: "1" as sent, one more per edit and for a recall
 * @property {string} [messageId] live messages only: the message's UUIDv7
 * @property {string} [updatedAt] history only: when it last changed
 * @property {'recalled'|'blocked'} [status] history only: a message without content
 * @property {boolean} live true for a live data frame, false when it came from history (catch-up)
 */

/**
 * A change of a message: an edit (new content and version) or a recall. Delivered once per
 * (topic, seq, version), live or found on catch-up.
 *
 * @typedef {object} MessageUpdate
 * @property {string} topic
 * @property {string} seq
 * @property {'edit'|'recall'} what
 * @property {string} [version] edits: the content version after the edit
 * @property {unknown} [content] edits: the new content
 * @property {string} [from] who changed it (live changes)
 * @property {string} [ts] when (live changes)
 * @property {boolean} live true for an info frame, false when catch-up found it
 */

/**
 * @typedef {object} SendAck
 * @property {string} topic
 * @property {string} seq the message's seq
 * @property {string} messageId
 * @property {string} ts when it was committed
 * @property {string} clientMsgId
 * @property {boolean} duplicate true when a resend found the message stored already (by an earlier attempt)
 */

/**
 * @typedef {object} SendOptions
 * @property {Head} [head]
 * @property {MsgType} [msgType] default text
 * @property {string} [clientMsgId] the idempotency key; default a random one. 1-64 of [A-Za-z0-9._:-]
 */

/**
 * @typedef {'queued'|'sending'|'retrying'|'sent'|'failed'} OutboxStatus
 * queued: waits for the connection (or for the topic's subscription, or for the message before it
 * in the same topic); sending: sent, no answer yet; retrying: refused for a while (rate limit,
 * a dependency down), sent again later; sent: acked; failed: refused for good (the promise rejected).
 */

/**
 * @typedef {object} OutboxEntry
 * @property {string} clientMsgId
 * @property {string} topic
 * @property {unknown} content
 * @property {OutboxStatus} status
 * @property {number} attempts how often it was sent
 * @property {Error} [error] the last refusal or failure
 * @property {SendAck} [ack] once sent
 */

/**
 * @typedef {object} HistoryQuery
 * @property {string|number} [afterSeq] catch up: the lowest seqs above it (exclusive); 0 or absent: unset
 * @property {string|number} [beforeSeq] scroll back: the highest seqs below it (exclusive); neither bound: the latest
 * @property {number} [limit] page size; the server's default (50) when absent, at most its maximum (100)
 */

/**
 * @typedef {object} HistoryPage
 * @property {string} topic
 * @property {Message[]} messages in ascending seq order
 * @property {string} lastSeq the topic's watermark: every seq up to it is a message or a final hole
 * @property {boolean} hasMore more messages lie beyond the page (above it with afterSeq, below it otherwise)
 */

/**
 * @typedef {object} SubscribeOptions
 * @property {string} [since] emit every message after this seq (catch up from there); default: from now
 * @property {number} [latest] without since: also emit the latest this many messages first; default 0
 * @property {boolean} [catchUp] default true: catch up after every (re)subscribe and keep seq order.
 *   false: live messages only, as they come (deduped), no history read at all (e.g. to count
 *   unread messages of a list); startCatchUp() turns it on later
 */

/**
 * @typedef {'pending'|'active'|'ended'|'failed'} SubscriptionState
 * pending: not subscribed on the current connection yet (connecting, or the server's read models
 * do not know the membership yet); active: messages flow; ended: unsubscribe(), or the server
 * ended it (left, removed, dissolved, blocked); failed: refused for good (the error says why).
 */

/**
 * @typedef {object} Presence
 * @property {string} topic
 * @property {string} user the user who came or went
 * @property {boolean} online true: came ("on"); false: went ("off": the last of their sessions in the topic)
 */

/**
 * @typedef {object} Typing
 * @property {string} topic
 * @property {string} user
 */

/**
 * @typedef {object} Receipt
 * @property {string} topic a 1:1 topic
 * @property {string} user the other party
 * @property {'read'|'recv'} what
 * @property {string} seq how far they read or received
 */

/**
 * A committed change of a topic: a group's profile or settings, a member's arrival, departure,
 * role or mute, a friend request or block in a 1:1 topic. Re-read what changed over REST.
 *
 * @typedef {object} TopicChange
 * @property {string} topic
 * @property {string} what e.g. joined, left, removed, role, dissolved, friend_requested, blocked (see /asyncapi.json, infoTopicChange)
 * @property {string} [src] the user it concerns
 * @property {string} [from] the user who made it
 */

/**
 * @typedef {object} Notice
 * @property {string} what "broadcast" (a message to the whole tenant) or a note to this user such as "file_rejected"
 * @property {string} ts
 * @property {unknown} [content]
 */

/**
 * @typedef {object} Unsubscribed
 * @property {string} topic
 * @property {string} reason "unsubscribe"; the change that ended it: left, removed, dissolved, blocked; or the
 *   stable reason the server refused the sub with (not_member, ...): then error is set
 * @property {Error} [error] the refusal, when the subscription failed
 */

/**
 * @typedef {object} OutboxChange
 * @property {OutboxEntry} entry
 */

/**
 * The kinds of items of the per-user channel (see /asyncapi.json, meItem): group memberships,
 * relations, new 1:1 chats, read marks made on another device and account changes.
 *
 * @typedef {'joined'|'invited'|'join_requested'|'join_rejected'|'left'|'removed'|'unbanned'|'role'|'mute'|'unmute'|'dissolved'
 *   |'friend_requested'|'friend_accepted'|'friend_declined'|'friend_removed'|'blocked'|'unblocked'
 *   |'conv'|'read'|'account'} ItemKind
 */

/**
 * An item of the user's channel as the server logs it: numbered by seq within the log's epoch,
 * emitted once, in seq order, across reconnects ("item" event).
 *
 * @typedef {object} ChannelItem
 * @property {string} seq its seq in the user's log, a decimal string
 * @property {string} epoch the log's epoch
 * @property {ItemKind} what
 * @property {string} [topic] the conversation it concerns
 * @property {string} [from] who made the change
 * @property {string} [src] whom it concerns
 * @property {'owner'|'admin'|'member'} [role] role: the new role
 * @property {string} [read_seq] read: the new read mark
 * @property {AccountChange} [change] account: what happened
 * @property {string} [reason] account: what the sessions it ends are told
 * @property {DataFrame} [message] conv: the first message (a live data frame's fields, its topic absent)
 * @property {string} ts
 */

/**
 * @typedef {'banned'|'unbanned'|'kicked'|'tokens_revoked'|'password_reset'|'password_changed'|'session_ended'} AccountChange
 */

/**
 * A new 1:1 conversation ("chat" event), once per topic: from its channel item (its first
 * message committed), or found by a re-read of the conversation list after a reconnect or a
 * resync when the item itself was lost.
 *
 * @typedef {object} NewChat
 * @property {string} topic
 * @property {string} peer the other party
 * @property {Message} [message] the first message (from the item); absent when found by a re-read
 * @property {ConversationState} conversation its state now
 */

/**
 * A change of a group membership that concerns the user: "invitation" (invited), "joinRequest"
 * (join_requested, join_rejected; and joined with from ≠ src heard by a decider: an approval),
 * "membership" (the user's own joined, left, removed, role, mute, unmute, unbanned; dissolved).
 *
 * @typedef {object} GroupEvent
 * @property {string} topic the group's topic
 * @property {ItemKind} what
 * @property {string} [from] who made the change
 * @property {string} [src] the member it concerns
 * @property {'owner'|'admin'|'member'} [role] role only
 * @property {string} ts
 */

/**
 * A change of a relation, heard by both users: "friend" (friend_requested, friend_accepted,
 * friend_declined, friend_removed) and "block" (blocked, unblocked). from acted; src is the other.
 *
 * @typedef {object} RelationEvent
 * @property {string} topic the 1:1 topic of the two users
 * @property {ItemKind} what
 * @property {string} from
 * @property {string} src
 * @property {string} ts
 */

/**
 * The user's read mark moved on another device ("read" event).
 *
 * @typedef {object} ReadMarkEvent
 * @property {string} topic
 * @property {string} seq the new read mark
 * @property {string} ts
 */

/**
 * A change of the user's account ("account" event). A ban, a kick, a revocation or a sign-out
 * of this session also end it: the Client then closes ("session_revoked" for a sign-out).
 *
 * @typedef {object} AccountEvent
 * @property {AccountChange} change
 * @property {string} [reason] what the sessions it ends are told
 * @property {string} ts
 */

/**
 * This session's login session was signed out (from another device, or a logout everywhere):
 * the Client closed for good with reason session_revoked.
 *
 * @typedef {object} SessionRevoked
 * @property {string} reason session_revoked
 */

/**
 * A conversation as the channel keeps it: counters and last message, from the conversation
 * list (read at the start, after a reconnect and on a resync, and once more a second later)
 * moved on by every message, recall, edit and read mark the channel and the subscriptions bring.
 *
 * @typedef {object} ConversationState
 * @property {string} topic
 * @property {'group'|'direct'} kind
 * @property {string} [peer] direct: the other party
 * @property {string} lastSeq the highest message seq known
 * @property {string} readSeq the user's read mark
 * @property {number} unread lastSeq - readSeq (the server's count)
 * @property {number} mentions unread messages from others that mention the user or everyone
 * @property {Message|null} lastMessage the newest message known (content absent when recalled)
 * @property {string} activeAt when it was last active
 * @property {boolean} [removed] the user is no longer in it (left, removed, dissolved): forget it
 */

/**
 * The conversation list was (re)read ("conversations" event): at the start, after a reconnect
 * (the conversations active since the connection was lost), after a resync (all of them), and
 * recheckMs after each of those (recheck: the conversations active since a little before it).
 *
 * @typedef {object} ConversationsLoaded
 * @property {'start'|'reconnect'|'resync'|'recheck'} reason
 * @property {ConversationState[]} conversations the conversations read, most recently active first
 * @property {import('./rest.js').Conversation[]} entries the list's entries as read (names, roles, peers' read marks)
 */

/**
 * The channel's log no longer holds every item after the client's position (trimmed, expired or
 * lost: another epoch): items in between are gone, what they were about is re-read from REST
 * ("resync" event, then "conversations"; friend requests, invitations and blocks are the app's to
 * re-read).
 *
 * @typedef {object} Resync
 * @property {string} epoch the log's epoch from now on
 * @property {string} lastSeq the seq the client goes on from
 */

/**
 * @typedef {'pending'|'active'|'failed'} ChannelState
 * pending: not on the channel on the current connection yet (or not caught up); active: items
 * and conversation frames flow; failed: the server does not serve the channel (501) or refused
 * it for good. (A Client made with channel false has no channel: Client.channel is null.)
 */

/**
 * The events of a Client.
 *
 * @typedef {object} ClientEvents
 * @property {StateChange} state the connection state changed
 * @property {Session} ready logged in (after every reconnect too); subscriptions and sends resume
 * @property {Message} message a new message of a subscribed topic; once per (topic, seq), in seq order per topic
 * @property {MessageUpdate} update an edit or recall, once per (topic, seq, version)
 * @property {Presence} presence
 * @property {Typing} typing
 * @property {Receipt} receipt
 * @property {TopicChange} change
 * @property {Notice} notice a broadcast to the tenant or a note to this user
 * @property {Unsubscribed} unsubscribed a subscription ended
 * @property {OutboxChange} outbox a send changed status
 * @property {Error} error a failure no promise reports: a refused note, a refreshToken hook that threw
 * @property {ChannelItem} item an item of the user's channel, once per seq, in seq order
 * @property {NewChat} chat a new 1:1 conversation, once per topic
 * @property {GroupEvent} invitation the user was invited to a group
 * @property {GroupEvent} joinRequest a join request, its rejection or approval (the requester and the deciders)
 * @property {GroupEvent} membership the user's own membership changed, or the group was dissolved
 * @property {RelationEvent} friend a friend request or its answer, or a friendship ended
 * @property {RelationEvent} block a block or unblock between the user and another
 * @property {ReadMarkEvent} read the user's read mark moved on another device
 * @property {AccountEvent} account the user's account changed
 * @property {SessionRevoked} session_revoked this login session was signed out; the client closed
 * @property {ConversationState} conversation a conversation's counters or last message changed
 * @property {ConversationsLoaded} conversations the conversation list was (re)read
 * @property {Resync} resync the channel's log was lost or trimmed past the client's position
 */

/**
 * The frames the SDK reads (see /asyncapi.json for every field).
 *
 * @typedef {object} CtrlFrame
 * @property {string} [id]
 * @property {number} code
 * @property {string} text
 * @property {string} [reason]
 * @property {Record<string, any>} [params]
 * @property {string} ts
 */

/**
 * @typedef {object} DataFrame
 * @property {string} topic
 * @property {string} seq
 * @property {string} from
 * @property {string} [message_id]
 * @property {MsgType} [msg_type]
 * @property {'recalled'|'blocked'} [status]
 * @property {string} [version]
 * @property {Head} [head]
 * @property {string} ts
 * @property {string} [updated_at]
 * @property {unknown} [content]
 */

/**
 * @typedef {object} InfoFrame
 * @property {string} [topic]
 * @property {string} [from]
 * @property {string} what
 * @property {string} [seq]
 * @property {string} [src]
 * @property {string} [message_id]
 * @property {string} [version]
 * @property {string} [ts]
 * @property {unknown} [content]
 */

/**
 * @typedef {object} PresFrame
 * @property {string} topic
 * @property {'on'|'off'} what
 * @property {string} src
 */

/**
 * A frame of the per-user channel: an item (with seq and epoch) or a conversation frame (what
 * msg, recall or edit, with msg_seq, no seq).
 *
 * @typedef {object} MeFrame
 * @property {string} what
 * @property {string} [seq]
 * @property {string} [epoch]
 * @property {string} [topic]
 * @property {string} [from]
 * @property {string} [src]
 * @property {string} [role]
 * @property {string} [read_seq]
 * @property {string} [change]
 * @property {string} [reason]
 * @property {DataFrame} [message]
 * @property {string} [msg_seq]
 * @property {string} [message_id]
 * @property {MsgType} [msg_type]
 * @property {string} [version]
 * @property {Head} [head]
 * @property {string} ts
 * @property {unknown} [content]
 */

/**
 * @typedef {object} ServerFrame
 * @property {CtrlFrame} [ctrl]
 * @property {DataFrame} [data]
 * @property {InfoFrame} [info]
 * @property {PresFrame} [pres]
 * @property {MeFrame} [me]
 */

export {};
