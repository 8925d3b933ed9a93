// Typed helpers for the REST API (/openapi.json describes every endpoint): the calls a chat
// client makes besides the WebSocket session. Answers are the envelope's data, field names as
// the API spells them.

import { ApiError } from './errors.js';
import { randomId } from './ids.js';

/**
 * @typedef {object} RestOptions
 * @property {string} [baseUrl] the server's origin, e.g. http://localhost:8080; default "" (the page's own)
 * @property {string | (() => string)} [token] the bearer token; "" or absent for the public endpoints
 * @property {typeof fetch} [fetch] default globalThis.fetch
 */

/**
 * @typedef {object} RequestOptions
 * @property {unknown} [body] sent as JSON
 * @property {Record<string, string|number|undefined>} [query]
 * @property {string} [idempotencyKey] for a write; default a fresh random key per call
 * @property {boolean} [noIdempotencyKey] send none: the writes whose body holds a password take none
 */

/** @typedef {{user_id: string, login: string, registered_at: string}} RegisteredUser */
/** @typedef {{token: string, expires_at: string, user_id: string, session_id?: string}} LoginResult */
/** @typedef {{tenant: string, login: string, password: string, nickname?: string, avatar?: string, signature?: string}} RegisterRequest */
/** @typedef {{tenant: string, login: string, password: string, device?: string}} LoginRequest */
/**
 * One of the user's active login sessions.
 *
 * @typedef {object} LoginSession
 * @property {string} session_id
 * @property {boolean} current true for the session of the token that asked
 * @property {string} [device] the label the client gave at login
 * @property {string} [user_agent]
 * @property {string} [ip_hint] the network the login came from (a /24 or /48)
 * @property {string} started_at
 * @property {string} expires_at
 */
/** @typedef {{sessions: LoginSession[]}} LoginSessionList */
/** @typedef {{session_id: string, unchanged?: boolean}} SessionEnded */
/** @typedef {{revoked_before: string, kept_session?: string}} PasswordChanged */
/** @typedef {{group_id?: string, topic?: string, unchanged: boolean}} CommandResult */
/** @typedef {{join_approval: boolean, who_may_invite: string, who_may_announce: string, mute_all: boolean}} GroupSettings */
/** @typedef {{name: string, avatar?: string, intro?: string, settings?: GroupSettings}} CreateGroupRequest */
/** @typedef {{group_id: string, topic: string, name: string, avatar?: string, intro?: string, owner: string, member_count: number, announcement?: string, status: 'normal'|'dissolved', settings: GroupSettings}} Group */
/** @typedef {{user_id: string, role: 'owner'|'admin'|'member', joined_at?: string, muted_until?: string}} Member */
/** @typedef {{members: Member[], next_cursor?: string}} MemberPage */
/** @typedef {{user_id: string, nickname: string, avatar?: string, signature?: string, updated_at: string}} Profile */
/** @typedef {{user_id: string, status: 'online'|'offline'|'unknown', online: boolean, last_seen?: string}} PresenceInfo */
/** @typedef {{user_ids: string[]}} UserList */
/** @typedef {{user_id: string, direction: 'incoming'|'outgoing', message?: string, at: string}} FriendRequest */
/** @typedef {{requests: FriendRequest[]}} FriendRequestList */
/**
 * @typedef {object} StoredMessage
 * @property {string} topic
 * @property {string} seq
 * @property {string} from
 * @property {string} [to]
 * @property {string} [client_msg_id]
 * @property {string} msg_type
 * @property {'normal'|'recalled'|'blocked'} status
 * @property {unknown} content null when recalled or blocked
 * @property {import('./types.js').Head} [head]
 * @property {string} version
 * @property {string} sent_at
 * @property {string} updated_at
 * @property {string} [recalled_at]
 * @property {string} [recalled_by]
 */
/** @typedef {{topic: string, messages: StoredMessage[], last_seq: string, has_more: boolean}} RestHistory */
/**
 * @typedef {object} Conversation
 * @property {string} topic
 * @property {'group'|'direct'} kind
 * @property {string} [group_id]
 * @property {string} [name]
 * @property {'owner'|'admin'|'member'} [role]
 * @property {number} [member_count]
 * @property {string} [peer]
 * @property {string} [peer_read_seq]
 * @property {string} last_seq
 * @property {string} read_seq
 * @property {string} unread
 * @property {string} mentions
 * @property {StoredMessage} [last_message]
 * @property {string} [active_at]
 */
/** @typedef {{conversations: Conversation[], next_cursor?: string}} ConversationList */
/** @typedef {{topic: string, seq: string, message_id: string, version?: string, at: string}} MessageChange */
/** @typedef {{topic: string, read_seq: string, recv_seq: string, changed: boolean}} ReadMarks */

/**
 * RestClient calls the REST API. Every write carries an Idempotency-Key (fresh per call unless
 * given: pass the same key to retry a write safely). A refusal rejects with an ApiError carrying
 * the status, the envelope's reason and details; a network failure rejects with fetch's error.
 */
export class RestClient {
  /** @param {RestOptions} [options] */
  constructor(options = {}) {
    this._base = (options.baseUrl ?? '').replace(/\/$/, '');
    this._token = options.token ?? '';
    this._fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /**
   * setToken sets the bearer token of later calls.
   *
   * @param {string | (() => string)} token
   */
  setToken(token) { this._token = token; }

  /**
   * request calls method path and resolves with the envelope's data.
   *
   * @template T
   * @param {string} method
   * @param {string} path
   * @param {RequestOptions} [options]
   * @returns {Promise<T>}
   */
  async request(method, path, options = {}) {
    const token = typeof this._token === 'function' ? this._token() : this._token;
    /** @type {Record<string, string>} */
    const headers = { Accept: 'application/json' };
    if (options.body !== undefined) { headers['Content-Type'] = 'application/json'; }
    if (token) {
      headers.Authorization = 'Bearer ' + token;
      if (method !== 'GET' && method !== 'HEAD' && !options.noIdempotencyKey) { headers['Idempotency-Key'] = options.idempotencyKey ?? randomId(); }
    }
    let url = this._base + path;
    const q = Object.entries(options.query || {}).filter(([, v]) => v !== undefined && v !== '');
    if (q.length > 0) { url += '?' + q.map(([k, v]) => encodeURIComponent(k) + '=' + encodeURIComponent(String(v))).join('&'); }
    const res = await this._fetch(url, {
      method, headers, credentials: 'omit', cache: 'no-store',
      body: options.body === undefined ? undefined : JSON.stringify(options.body)
    });
    /** @type {{data?: T, reason?: string, message?: string, details?: Record<string, unknown>, request_id?: string}} */
    const env = await res.json().catch(() => ({}));
    if (!res.ok) {
      throw new ApiError(res.status, env.reason || '', env.message || '', env.details, env.request_id);
    }
    return /** @type {T} */ (env.data ?? {});
  }

  // ---- accounts --------------------------------------------------------------------------------

  /** @param {RegisterRequest} body @returns {Promise<RegisteredUser>} */
  register(body) { return this.request('POST', '/v1/im/auth/register', { body }); }

  /** @param {LoginRequest} body @returns {Promise<LoginResult>} */
  login(body) { return this.request('POST', '/v1/im/auth/login', { body }); }

  /** @param {string} uid a user id or "me" @returns {Promise<Profile>} */
  user(uid) { return this.request('GET', '/v1/im/users/' + encodeURIComponent(uid)); }

  /** @param {string} uid @returns {Promise<PresenceInfo>} */
  presence(uid) { return this.request('GET', '/v1/im/users/' + encodeURIComponent(uid) + '/presence'); }

  // ---- the user's own account -----------------------------------------------------------------

  /** sessions lists the user's active login sessions, most recent first. @returns {Promise<LoginSessionList>} */
  sessions() { return this.request('GET', '/v1/im/account/sessions'); }

  /**
   * endSession signs out one of the user's login sessions (a lost device): its tokens are refused
   * and its WebSocket connections closed (session_revoked) on every node.
   *
   * @param {string} sessionId
   * @returns {Promise<SessionEnded>}
   */
  endSession(sessionId) { return this.request('DELETE', '/v1/im/account/sessions/' + encodeURIComponent(sessionId)); }

  /** logout ends the token's own login session. @returns {Promise<SessionEnded>} */
  logout() { return this.request('POST', '/v1/im/account/logout'); }

  /** logoutEverywhere refuses every token of the user issued before now, this one's too. @returns {Promise<{revoked_before: string}>} */
  logoutEverywhere() { return this.request('POST', '/v1/im/account/logout-everywhere'); }

  /**
   * changePassword replaces the password (the old one is checked: 403 wrong_password); the user's
   * other sessions end, this one goes on.
   *
   * @param {string} oldPassword
   * @param {string} newPassword
   * @returns {Promise<PasswordChanged>}
   */
  changePassword(oldPassword, newPassword) {
    return this.request('PUT', '/v1/im/account/password', { body: { old_password: oldPassword, new_password: newPassword }, noIdempotencyKey: true });
  }

  /**
   * deleteAccount hands the account to the erasure, after checking the password. A server
   * without the erasure refuses it (an ApiError).
   *
   * @param {string} password
   * @returns {Promise<unknown>}
   */
  deleteAccount(password) { return this.request('POST', '/v1/im/account/delete', { body: { password }, noIdempotencyKey: true }); }

  // ---- conversations and messages --------------------------------------------------------------

  /** @param {{cursor?: string, limit?: number}} [page] @returns {Promise<ConversationList>} */
  conversations(page = {}) { return this.request('GET', '/v1/im/conversations', { query: page }); }

  /**
   * @param {string} topic
   * @param {{after_seq?: string, before_seq?: string, limit?: number}} [query]
   * @returns {Promise<RestHistory>}
   */
  history(topic, query = {}) { return this.request('GET', topicPath(topic) + '/messages', { query }); }

  /**
   * editMessage replaces a message's content; version is the content version being edited (a
   * stale one is 409 conflict).
   *
   * @param {string} topic
   * @param {string} seq
   * @param {{version: string, content: unknown}} body
   * @returns {Promise<MessageChange>}
   */
  editMessage(topic, seq, body) { return this.request('PATCH', messagePath(topic, seq), { body }); }

  /** @param {string} topic @param {string} seq @returns {Promise<MessageChange>} */
  recallMessage(topic, seq) { return this.request('POST', messagePath(topic, seq) + '/recall'); }

  /** deleteMessage deletes a message for the caller only. @param {string} topic @param {string} seq @returns {Promise<MessageChange>} */
  deleteMessage(topic, seq) { return this.request('DELETE', messagePath(topic, seq)); }

  /** @param {string} topic @param {{read_seq?: string, recv_seq?: string}} marks @returns {Promise<ReadMarks>} */
  markRead(topic, marks) { return this.request('POST', topicPath(topic) + '/read', { body: marks }); }

  // ---- groups ----------------------------------------------------------------------------------

  /** @param {CreateGroupRequest} body @returns {Promise<CommandResult>} */
  createGroup(body) { return this.request('POST', '/v1/im/groups', { body }); }

  /** @param {string} gid @returns {Promise<Group>} */
  group(gid) { return this.request('GET', groupPath(gid)); }

  /** @param {string} gid @param {{cursor?: string, limit?: number}} [page] @returns {Promise<MemberPage>} */
  members(gid, page = {}) { return this.request('GET', groupPath(gid) + '/members', { query: page }); }

  /** @param {string} gid @returns {Promise<CommandResult>} */
  joinGroup(gid) { return this.request('POST', groupPath(gid) + '/join'); }

  /** @param {string} gid @returns {Promise<CommandResult>} */
  leaveGroup(gid) { return this.request('POST', groupPath(gid) + '/leave'); }

  // ---- friends and blocks ----------------------------------------------------------------------

  /** @returns {Promise<UserList>} */
  friends() { return this.request('GET', '/v1/im/friends'); }

  /** @returns {Promise<FriendRequestList>} */
  friendRequests() { return this.request('GET', '/v1/im/friends/requests'); }

  /** @param {string} uid @param {string} [message] @returns {Promise<CommandResult>} */
  requestFriend(uid, message) {
    return this.request('POST', '/v1/im/friends/requests', { body: message ? { user_id: uid, message } : { user_id: uid } });
  }

  /** @param {string} uid @returns {Promise<CommandResult>} */
  acceptFriend(uid) { return this.request('POST', '/v1/im/friends/requests/' + encodeURIComponent(uid) + '/accept'); }

  /** @param {string} uid @returns {Promise<CommandResult>} */
  declineFriend(uid) { return this.request('POST', '/v1/im/friends/requests/' + encodeURIComponent(uid) + '/decline'); }

  /** @param {string} uid @returns {Promise<CommandResult>} */
  block(uid) { return this.request('POST', '/v1/im/blocks', { body: { user_id: uid } }); }

  /** @param {string} uid @returns {Promise<CommandResult>} */
  unblock(uid) { return this.request('DELETE', '/v1/im/blocks/' + encodeURIComponent(uid)); }
}

/** @param {string} topic */
function topicPath(topic) { return '/v1/im/topics/' + encodeURIComponent(topic); }

/** @param {string} topic @param {string} seq */
function messagePath(topic, seq) { return topicPath(topic) + '/messages/' + encodeURIComponent(seq); }

/** @param {string} gid */
function groupPath(gid) { return '/v1/im/groups/' + encodeURIComponent(gid); }
