// Package ws is the WebSocket gateway at /v1/im/ws (DESIGN §6): JSON frames in the style of
// Tinode over gobwas/ws, one reader and one writer goroutine per connection, a bounded send queue
// that never blocks the sender, and a per-node hub of topic subscriptions fed by fanout.
//
// # Frames
//
// asyncapi.json (served at AsyncAPIPath, /asyncapi.json) is the AsyncAPI 3.0 document of every
// frame below, with its codes, params and reasons; a test holds real frames to it.
//
// Every WebSocket message is one JSON text object with exactly one key, the frame type (a
// binary message is closed with 1003); keys appear once and match exactly. Seqs and 64-bit ids
// are strings. Client frames: hi, login, sub, leave, pub, get, note, ping. Server
// frames: me (the per-user channel, see below), ctrl (the answer to a frame with an id, echoing it; code and a stable reason on
// errors), data (a message; content exactly as its sender sent it), pres (a user came "on" or
// went "off" in a topic; "off" only once none of the user's sessions, on any node, is left in
// it), info (a note: typing "kp", a "read" or "recv" receipt; or a change of
// the topic, see Changes).
//
// A session, frame by frame (> client, < server; tokens and ids shortened):
//
//	> {"hi":{"id":"1","ver":"1","ua":"demo/1.0"}}
//	< {"ctrl":{"id":"1","code":201,"text":"created","params":{"idle_timeout_s":60,"max_frame_size":65536,"sid":"f607bd7e2d0166c3","ver":"1"},"ts":"2026-11-29T07:55:43.056Z"}}
//	> {"pub":{"id":"2","topic":"grp7","client_msg_id":"c-1","content":"hello"}}
//	< {"ctrl":{"id":"2","code":401,"text":"login first","reason":"not_authenticated","ts":"2026-11-29T07:55:43.207Z"}}
//	> {"login":{"id":"3","token":"eyJhbGciOiJIUzI1NiIs...LGzTMyrK3w37X6Qum6Xm5e_8JYq6ZkLs3PO4ZxlvjhE"}}
//	< {"ctrl":{"id":"3","code":200,"text":"ok","params":{"expires":"2026-11-29T08:55:43.000Z","tenant":"acme","user":"42"},"ts":"2026-11-29T07:55:43.359Z"}}
//	> {"sub":{"id":"4","topic":"grp7"}}
//	< {"ctrl":{"id":"4","code":200,"text":"ok","params":{"topic":"grp7"},"ts":"2026-11-29T07:55:43.509Z"}}
//	> {"pub":{"id":"5","topic":"grp7","client_msg_id":"c-1","content":{"text":"hello <b>world</b>", "n": 1},"head":{"mentions":["43"]}}}
//	< {"ctrl":{"id":"5","code":202,"text":"accepted","params":{"message_id":"01a2264d-82b3-79e7-8538-2cf8c77ad357","seq":"1","topic":"grp7","ts":"2026-11-29T07:55:43.667Z"},"ts":"2026-11-29T07:55:43.670Z"}}
//	< {"data":{"topic":"grp7","seq":"1","from":"42","message_id":"01a2264d-82b3-79e7-8538-2cf8c77ad357","head":{"mentions":["43"]},"ts":"2026-11-29T07:55:43.667Z","content":{"text":"hello <b>world</b>", "n": 1}}}
//	< {"data":{"topic":"grp7","seq":"2","from":"43","message_id":"01a2264d-8344-7251-ba48-2ed7353cfd9b","ts":"2026-11-29T07:55:43.812Z","content":"hi 42"}}
//	> {"get":{"id":"6","topic":"grp7","after_seq":"0","limit":10}}
//	< {"data":{"topic":"grp7","seq":"1","from":"42","version":"1","head":{"mentions":["43"]},"ts":"2026-11-29T07:55:43.667Z","updated_at":"2026-11-29T07:55:43.667Z","content":{"n": 1, "text": "hello <b>world</b>"}}}
//	< {"data":{"topic":"grp7","seq":"2","from":"43","version":"1","ts":"2026-11-29T07:55:43.812Z","updated_at":"2026-11-29T07:55:43.812Z","content":"hi 42"}}
//	< {"ctrl":{"id":"6","code":200,"text":"ok","params":{"count":2,"has_more":false,"last_seq":"2","topic":"grp7"},"ts":"2026-11-29T07:55:43.963Z"}}
//	> {"note":{"topic":"grp7","what":"read","seq":"2"}}
//	> {"note":{"topic":"grp7","what":"kp"}}
//	< {"info":{"topic":"grp7","from":"43","what":"kp"}}
//	> {"pub":{"id":"7","topic":"p2p5_6","client_msg_id":"c-2","content":"x"}}
//	< {"ctrl":{"id":"7","code":403,"text":"forbidden","reason":"not_member","ts":"2026-11-29T07:55:44.566Z"}}
//	> {"pub":{"id":"8","topic":"grp7","content":"x"}}
//	< {"ctrl":{"id":"8","code":400,"text":"invalid client_msg_id: required","reason":"invalid","params":{"field":"client_msg_id","reason":"required"},"ts":"2026-11-29T07:55:44.716Z"}}
//	> {"frob":{"id":"9"}}
//	< {"ctrl":{"id":"9","code":400,"text":"unknown frame type \"frob\"","reason":"unknown_frame","ts":"2026-11-29T07:55:44.867Z"}}
//	> {"ping":{"id":"10"}}
//	< {"ctrl":{"id":"10","code":200,"text":"pong","ts":"2026-11-29T07:55:45.018Z"}}
//	> {"leave":{"id":"11","topic":"grp7"}}
//	< {"ctrl":{"id":"11","code":200,"text":"ok","params":{"topic":"grp7"},"ts":"2026-11-29T07:55:45.168Z"}}
//
// A pub is acked (202, with seq and message_id) only after its event is committed; then it goes
// to every online session of the topic, the sender's own included, on every node. A resend with
// the same client_msg_id is acked with the first seq and "duplicate":true and not delivered
// again. History pages come from the read models, which store content as JSON values: a get may
// return content re-serialized (key order, spacing), the realtime data frame never does.
//
// A realtime data frame carries the message_id and no version: a new message is version "1".
// A data frame answering a get carries no message_id (the read models keep none; topic and seq
// name a message) but the content version ("1" as sent, one more per edit and for a recall: the
// version an edit must name), updated_at (when the message last changed, ts's format; ts when it
// never did) and, for a recalled or blocked message, status without content or head. An edit's
// info frame carries the version after it.
//
// # Changes
//
// When a group, membership or relation command commits, every session subscribed to the topic it
// concerns, on every node, gets an info frame naming the change: src is the user it concerns and
// from the user who made it, each present when there is one and it is known.
//
//	< {"info":{"topic":"grp7","what":"removed","src":"43"}}
//	< {"info":{"topic":"grp7","what":"role","src":"44"}}
//	< {"info":{"topic":"grp7","what":"dissolved"}}
//	< {"info":{"topic":"p2p5_6","from":"5","what":"blocked","src":"6"}}
//
// what is, in a group topic: profile, settings, announcement, owner (then role frames follow),
// dissolved; and about member src: invited, join_requested, join_rejected, joined, left, removed
// (with or without a ban), unbanned, role, mute, unmute. In a 1:1 topic, about what user from did
// to src: friend_requested, friend_accepted, friend_declined, friend_removed, blocked, unblocked.
// Clients refresh what the change is about (member list, roles, settings) from REST.
//
// Some changes end subscriptions at once, server-side, with no ctrl: left and removed end every
// subscription of user src to the group topic, dissolved every subscription to it, and blocked
// ends src's subscriptions to the 1:1 topic (the blocker's stay). That info frame is the last
// frame of the topic the dropped session gets; the other members get the same frame, which tells
// them src is gone (no "off" pres follows). A leave of the dropped topic is answered 200; what
// else the user may do is the Policy's to say: with the membership policy of imledger serve, a
// member who left or was removed is refused sub, get and pub (403 not_member), and a blocked user
// is refused pub to the blocker (403 blocked). A sub whose policy check crossed such a change is
// checked again, so it never outlives the change; it is answered 409 conflict only if changes
// keep crossing it. Such changes reach every node, not only those with online members of the
// topic, so a sub on a node that had none is caught as well; and on a node whose policies cache
// states (Invalidating), a change marks the states it concerns stale before the Hub applies it,
// so a later sub is never answered from what was cached before it. A user's profile change belongs to no topic and is not pushed.
//
// # Ended sessions and broadcasts
//
// With a Gate, a login is refused like a REST request of its token (403 tenant_not_found,
// tenant_suspended, user_banned; 401 token_revoked). A logged-in session ends, on every node at
// once, when a fanout.KindAccount message says so: its user was banned (user_banned) or kicked
// (kicked), its token predates a revocation (token_revoked), its tenant was suspended
// (tenant_suspended). It gets a last ctrl frame without id naming the reason and is closed with
// 1008 and the reason as text; a session whose node missed the message is ended the same way at
// its next frame that needs a login, when the Gate refuses it.
//
//	< {"ctrl":{"code":403,"text":"session ended","reason":"user_banned","ts":"2026-11-29T08:01:02.003Z"}}
//
// A tenant broadcast reaches every logged-in session of the tenant as an info frame without a
// topic, content spliced verbatim:
//
//	< {"info":{"what":"broadcast","ts":"2026-11-29T08:01:02.003Z","content":{"text":"maintenance at 22:00"}}}
//
// # The per-user channel
//
// A sub of the topic "me" (ChannelTopic) puts the session on its user's channel: it gets every
// new item of the user's log (transport/userchan) as a me frame with the item's seq and epoch,
// and, for every message, recall and edit of each of the user's conversations it is not
// subscribed to, a me frame without seq (what "msg", "recall", "edit") carrying the conversation's
// last message:
//
//	> {"sub":{"id":"12","topic":"me"}}
//	< {"ctrl":{"id":"12","code":200,"text":"ok","params":{"epoch":"9f2c41d07a3be815","last_seq":"41","topic":"me"},"ts":"…"}}
//	< {"me":{"seq":"42","epoch":"9f2c41d07a3be815","what":"friend_requested","topic":"p2p42_57","from":"57","src":"42","ts":"…"}}
//	< {"me":{"what":"msg","topic":"grp9","msg_seq":"118","from":"43","message_id":"…","ts":"…","content":{"text":"hi"}}}
//	> {"get":{"id":"13","topic":"me","epoch":"9f2c41d07a3be815","after_seq":"37"}}
//	< {"me":{"seq":"38",…}} … then {"ctrl":{"id":"13","code":200,"params":{"count":5,"epoch":"…","has_more":false,"last_seq":"42","topic":"me"},…}}
//	< {"ctrl":{"id":"14","code":205,"text":"resync","params":{"epoch":"…","last_seq":"42","resync":true,"topic":"me"},…}}
//
// The hub keeps, per group topic, the channel sessions that watch it (the user's groups, read
// from ChannelState at the sub, corrected by the log's last items and followed through joined,
// left, removed and dissolved items and the control messages that end subscriptions), and for
// each session the 1:1 topics whose peer blocks the user; a 1:1 topic's messages reach the
// channel sessions of its two users. presence registers the node, not each session, for each
// watched topic and channel user, and fanout sends a topic's messages to those nodes too. A get
// of "me" reads the log after a seq of an epoch, or answers 205 resync when the log no longer
// holds every item after it.
//
// # Delivery and recovery
//
// Realtime delivery is best effort: a client that reconnects, or sees a gap in a topic's seqs,
// sends get with after_seq set to the last seq it has. Seq holes are possible (a failed send
// keeps its seq until it is given up). last_seq in the get answer is the topic's watermark: every
// seq up to it is a message or a final hole, and no message above it is served, so a client that
// has every message up to last_seq has caught up; one that saw a higher seq in a data frame asks
// again a moment later.
//
// # Connections
//
// A client that sends nothing for IdleTimeout is closed (1008 "idle timeout"); WebSocket pings
// and {"ping":{}} both count, so clients ping every IdleTimeout/2. A session ends when its token
// expires (a ctrl token_expired, then 1008), pings or not. Typing notes are relayed at most once
// per TypingInterval and topic, and subs and leaves are rate limited (SubRate, SubBurst), so one
// client cannot flood the others. Every inbound frame refreshes
// the session's presence. A client whose send queue is full is disconnected at once. A message
// over MaxFrameSize is answered with ctrl 413 frame_too_large and a close 1009. Browsers must
// come from an allowed Origin (by default the page's own host); requests without an Origin
// header are non-browser clients and are let through, since they must log in with a token.
//
// A client's close frame is answered as RFC 6455 §7.4 says: a valid code is echoed, an empty
// close is answered 1000, a code no endpoint may send (or a one-byte close body) 1002, a reason
// that is not UTF-8 1007. A panic while handling a frame, or on any goroutine of a session, is
// recovered: it is logged with its stack and counted (imledger_panics_total{component="ws"}),
// that connection is closed with 1011, and the node's other sessions go on.
package ws
