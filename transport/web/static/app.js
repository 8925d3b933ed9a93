// imledger chat, the page: logs in over REST, lists the user's conversations and friends, and
// chats over the WebSocket gateway, both through the SDK (sdk/, the npm package @imledger/sdk):
// the SDK reconnects, resends and catches up; the page shows. The conversation list, its counters
// and new chats come over the SDK's per-user channel: the page never polls the list. Message content is always rendered
// as text (textContent), never as HTML. The open conversation is the URL's hash (#grp7,
// #p2p5_6), so a group's link can be shared and survives a reload.

import { Client, RestClient, gatewayUrl, randomId } from './sdk/index.js';

var TENANT = 'demo';
var HISTORY_PAGE = 50;
var CONV_PAGE = 100;
var PRESENCE_LOOKUPS = 50;
var PRESENCE_TTL_MS = 20000; // a peer's presence is looked up again after this
var TYPING_EVERY_MS = 3000;
var TYPING_SHOWN_MS = 5000;
var STORAGE_KEY = 'imledger.demo.session';
var TOPIC_RE = /^(grp[1-9][0-9]{0,18}|p2p[1-9][0-9]{0,18}_[1-9][0-9]{0,18})$/;

var api = {
  groups: '/v1/im/groups',
  convs: '/v1/im/conversations',
  friends: '/v1/im/friends',
  friendRequests: '/v1/im/friends/requests',
  group: function (gid) { return '/v1/im/groups/' + encodeURIComponent(gid); },
  members: function (gid) { return '/v1/im/groups/' + encodeURIComponent(gid) + '/members?limit=200'; },
  user: function (uid) { return '/v1/im/users/' + encodeURIComponent(uid); },
  presence: function (uid) { return '/v1/im/users/' + encodeURIComponent(uid) + '/presence'; },
  messages: function (topic) { return '/v1/im/topics/' + encodeURIComponent(topic) + '/messages'; },
  message: function (topic, seq) { return '/v1/im/topics/' + encodeURIComponent(topic) + '/messages/' + seq; }
};

function $(id) { return document.getElementById(id); }

var el = {};
['conn', 'whoami', 'logout-btn', 'login-view', 'login-form', 'login-name', 'login-password', 'login-error',
  'login-link-hint', 'chat-view', 'convs', 'convs-empty', 'convs-more', 'groups-box', 'create-form', 'group-name',
  'join-form', 'group-id', 'friends-box', 'requests-badge', 'friend-form', 'friend-id', 'requests', 'friends',
  'side-error', 'room-empty', 'room-open', 'room-dot', 'room-name', 'room-sub', 'share', 'share-link', 'share-copy',
  'join-banner', 'join-banner-text', 'join-banner-btn', 'older-btn', 'messages', 'typing', 'send-form',
  'message-label', 'message', 'send-btn', 'cancel-edit-btn', 'send-status', 'members-box', 'members', 'leave-btn',
  'account-box', 'password-form', 'old-password', 'new-password', 'sessions', 'logout-all-btn', 'delete-form',
  'delete-password', 'account-status', 'account-error'
].forEach(function (id) { el[id.replace(/-([a-z])/g, function (_, c) { return c.toUpperCase(); })] = $(id); });

var state = {
  token: '', userId: '', login: '', expiresAt: '',
  convs: new Map(),      // topic -> conversation entry (see conversationFrom)
  // What this session saw happen to messages, by topic: the history read models trail it, so a
  // page of history read meanwhile must not bring back a recalled text or a deleted message.
  recalled: new Map(),   // topic -> Set of recalled seqs
  deleted: new Map(),    // topic -> Set of seqs deleted for this user
  convCursor: '',
  names: new Map(),      // user id -> nickname
  online: new Map(),     // user id -> true/false, from presence lookups and pres frames
  presFrames: new Map(), // user id -> pres frames received about them
  friends: [], requests: [],
  topic: '',             // the open conversation
  room: null
};

function newRoom(topic) {
  return {
    topic: topic, bySeq: new Map(), minSeq: 0, maxSeq: 0, readSent: 0,
    editing: 0, typing: new Map(), lastTyping: 0, members: [], member: true
  };
}

// ---- small helpers -------------------------------------------------------------------------

function setText(node, text) { node.textContent = text == null ? '' : String(text); }
function node(tag, cls, text) {
  var n = document.createElement(tag);
  if (cls) { n.className = cls; }
  if (text != null) { setText(n, text); }
  return n;
}
function button(text, cls, onClick, label) {
  var b = node('button', cls, text);
  b.type = 'button';
  if (label) { b.setAttribute('aria-label', label); }
  b.addEventListener('click', onClick);
  return b;
}

function displayName(uid) {
  uid = String(uid);
  if (uid === state.userId) { return (state.names.get(uid) || state.login) + ' (you)'; }
  return state.names.get(uid) || 'user ' + uid;
}

function contentText(content) {
  if (typeof content === 'string') { return content; }
  if (content && typeof content === 'object' && typeof content.text === 'string') { return content.text; }
  return content == null ? '' : JSON.stringify(content);
}

function formatTime(ts) {
  var d = new Date(ts);
  if (isNaN(d.getTime())) { return ''; }
  var today = new Date();
  return d.toDateString() === today.toDateString() ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })
    : d.toLocaleDateString();
}

function isGroup(topic) { return topic.indexOf('grp') === 0; }
function groupOf(topic) { return topic.slice(3); }
function peerOf(topic) {
  var ids = topic.slice(3).split('_');
  return ids[0] === state.userId ? ids[1] : ids[0];
}
function directTopic(a, b) {
  var x = BigInt(a), y = BigInt(b);
  return x < y ? 'p2p' + a + '_' + b : 'p2p' + b + '_' + a;
}

// rest calls the REST API with the session's token; anon without one (register, login).
var rest = new RestClient({ token: function () { return state.token; } });
var anon = new RestClient();
function request(method, path, body) { return rest.request(method, path, body === undefined ? {} : { body: body }); }

// describe is an error's message with its detail reason, for people.
function describe(err) {
  var d = err.details && (err.details.reason || err.details.field);
  return err.message + (d ? ' (' + d + ')' : '');
}

// later runs f after a pause that doubles with tries: 0.4 s, 0.8 s, ...
function later(tries, f) { setTimeout(f, 400 * Math.pow(2, tries)); }

// The read models trail the commands by a moment: right after a create, join or friend request
// the group or membership may be unknown (404, or 403 not_member). Such refusals are retried.
var LAG_RETRIES = 6;
function readLagging(path, stillWanted, tries) {
  tries = tries || 0;
  return request('GET', path).catch(function (err) {
    if ((err.status === 403 || err.status === 404) && tries + 1 < LAG_RETRIES && stillWanted()) {
      return new Promise(function (resolve) { later(tries, resolve); })
        .then(function () { return readLagging(path, stillWanted, tries + 1); });
    }
    throw err;
  });
}

function sideError(prefix, err) {
  if (err && err.status === 401) { logout('Your session ended; log in again.'); return; }
  setText(el.sideError, prefix + (err ? describe(err) : ''));
}

// ---- names and presence --------------------------------------------------------------------

var nameLookups = new Set();
function learnName(uid) {
  uid = String(uid);
  if (nameLookups.has(uid)) { return; }
  nameLookups.add(uid);
  var session = state.token;
  readLagging(api.user(uid), function () { return state.token === session; }).then(function (u) {
    if (u.nickname && state.token === session) { state.names.set(uid, u.nickname); relabel(); }
  }).catch(function () { nameLookups.delete(uid); });
}

var presenceLookups = new Map(); // uid -> time of the last lookup
function learnPresence(uid) {
  uid = String(uid);
  if (uid === state.userId) { return; }
  var last = presenceLookups.get(uid);
  if (last && Date.now() - last < PRESENCE_TTL_MS) { return; }
  presenceLookups.set(uid, Date.now());
  var frames = state.presFrames.get(uid) || 0;
  request('GET', api.presence(uid)).then(function (p) {
    // A pres frame that arrived while the lookup was under way is newer than its answer.
    if ((state.presFrames.get(uid) || 0) !== frames) { return; }
    var on = !!p.online;
    if (state.online.get(uid) !== on) { state.online.set(uid, on); renderPresence(); }
  }).catch(function () { /* unknown: leave the dot as it is */ });
}

function isOnline(uid) { return String(uid) === state.userId || state.online.get(String(uid)) === true; }

function dot(uid) {
  var d = node('span', 'dot' + (isOnline(uid) ? ' on' : ''));
  d.dataset.user = String(uid);
  d.setAttribute('role', 'img');
  d.setAttribute('aria-label', isOnline(uid) ? 'online' : 'offline');
  return d;
}

function renderPresence() {
  document.querySelectorAll('.dot[data-user]').forEach(function (d) {
    var on = isOnline(d.dataset.user);
    d.classList.toggle('on', on);
    d.setAttribute('aria-label', on ? 'online' : 'offline');
  });
}

function relabel() {
  renderConvs();
  renderFriends();
  renderMembers();
  if (state.room) {
    el.messages.querySelectorAll('li[data-from]').forEach(function (li) {
      setText(li.querySelector('.from'), displayName(li.dataset.from));
    });
    renderRoomHead();
  }
}

// ---- log in --------------------------------------------------------------------------------

function saveSession() {
  try {
    sessionStorage.setItem(STORAGE_KEY, JSON.stringify({
      token: state.token, userId: state.userId, login: state.login, expiresAt: state.expiresAt
    }));
  } catch (e) { /* storage may be disabled; the session then ends with the page */ }
}

function restoreSession() {
  var s;
  try { s = JSON.parse(sessionStorage.getItem(STORAGE_KEY) || 'null'); } catch (e) { s = null; }
  if (!s || !s.token || (s.expiresAt && new Date(s.expiresAt).getTime() <= Date.now())) { return false; }
  state.token = s.token; state.userId = String(s.userId); state.login = s.login; state.expiresAt = s.expiresAt;
  enterChat();
  return true;
}

el.loginForm.addEventListener('submit', function (ev) {
  ev.preventDefault();
  var action = ev.submitter && ev.submitter.value === 'register' ? 'register' : 'login';
  var login = el.loginName.value.trim().toLowerCase();
  var password = el.loginPassword.value;
  setText(el.loginError, '');
  if (!/^[a-z0-9_.-]{3,32}$/.test(login)) {
    setText(el.loginError, 'A login name is 3 to 32 of a-z, 0-9, "_", "." and "-".');
    el.loginName.focus();
    return;
  }
  if (!password) { setText(el.loginError, 'Enter a password.'); el.loginPassword.focus(); return; }
  var buttons = el.loginForm.querySelectorAll('button');
  buttons.forEach(function (b) { b.disabled = true; });
  var creds = { tenant: TENANT, login: login, password: password };
  var registered = action === 'register' ? anon.register(creds) : Promise.resolve();
  registered
    .then(function () { return anon.login(creds); })
    .then(function (data) {
      state.token = data.token; state.userId = String(data.user_id);
      state.login = login; state.expiresAt = data.expires_at || '';
      el.loginPassword.value = '';
      saveSession();
      enterChat();
    })
    .catch(function (err) { setText(el.loginError, (action === 'register' ? 'Registration failed: ' : 'Login failed: ') + describe(err)); })
    .finally(function () { buttons.forEach(function (b) { b.disabled = false; }); });
});

var listedOnce = false; // the channel read the conversation list of this login
function enterChat() {
  setText(el.whoami, 'Logged in as ' + state.login + ' · your user id ' + state.userId);
  el.whoami.hidden = false; el.logoutBtn.hidden = false;
  el.loginView.hidden = true; el.chatView.hidden = false;
  listedOnce = false;
  learnName(state.userId);
  closeRoom();
  loadFriends();
  startClient(); // its channel reads the list, then keeps it (see onConversations)
}

// firstListed runs once the first list is in: the list says which groups the user is a member
// of, which a linked group needs to know. The list may come in after the user has started
// typing somewhere: the focus moves to the first step only when no field has it.
function firstListed() {
  if (!state.token || state.room || openFromHash()) { return; }
  var typing = document.activeElement && document.activeElement.matches('input, textarea, select');
  var first = el.convs.querySelector('button');
  if (first) { if (!typing) { first.focus(); } return; }
  el.groupsBox.open = true; // a new user starts by making or joining a group
  if (!typing) { el.groupName.focus(); }
}

function logout(message) {
  state.token = '';
  try { sessionStorage.removeItem(STORAGE_KEY); } catch (e) { /* nothing stored */ }
  stopClient();
  closeAccount();
  closeRoom();
  state.convs.clear(); state.recalled.clear(); state.deleted.clear(); state.names.clear(); state.online.clear();
  nameLookups.clear(); presenceLookups.clear();
  state.friends = []; state.requests = []; friendsShown = '';
  el.convs.replaceChildren(); el.friends.replaceChildren(); el.requests.replaceChildren();
  el.chatView.hidden = true; el.loginView.hidden = false;
  el.whoami.hidden = true; el.logoutBtn.hidden = true;
  setText(el.conn, 'Not connected');
  setText(el.loginError, message || '');
  showLinkHint();
  el.loginName.focus();
}

// The header's Log out ends the login session on the server too (a token without one is
// refused no_session: it simply expires).
el.logoutBtn.addEventListener('click', function () {
  rest.logout().catch(function () { /* signed out locally either way */ }).finally(function () { logout(''); });
});

// ---- the conversation list -----------------------------------------------------------------

function conversationFrom(c) {
  return {
    topic: c.topic, kind: c.kind, groupId: c.group_id || '', name: c.name || '', role: c.role || '',
    memberCount: c.member_count || 0, peer: c.peer || '',
    lastSeq: Number(c.last_seq) || 0, readSeq: Number(c.read_seq) || 0,
    unread: Number(c.unread) || 0, mentions: Number(c.mentions) || 0,
    peerReadSeq: Number(c.peer_read_seq) || 0,
    last: c.last_message ? lastFrom(c.last_message) : null,
    activeAt: c.active_at || ''
  };
}

function lastFrom(m) {
  return { seq: Number(m.seq), from: String(m.from), ts: m.sent_at || m.ts || '', text: messageText(m) };
}

function messageText(m) {
  return m.status === 'recalled' ? '(message recalled)' : m.status === 'blocked' ? '(message unavailable)' : contentText(m.content);
}

// loadConversations reads a page of the list once (after a group change whose name or role the
// channel does not carry); the counters stay the channel's.
function loadConversations(cursor) {
  var session = state.token;
  var path = api.convs + '?limit=' + CONV_PAGE + (cursor ? '&cursor=' + encodeURIComponent(cursor) : '');
  return request('GET', path).then(function (data) {
    if (state.token !== session) { return; }
    if (!cursor) {
      var seen = new Set();
      (data.conversations || []).forEach(function (c) { seen.add(c.topic); });
      // Keep entries the server does not list yet (a group just created, a chat just opened).
      state.convs.forEach(function (c, topic) { if (!seen.has(topic) && !c.local) { state.convs.delete(topic); } });
    }
    listEntries(data.conversations || []);
    state.convCursor = data.next_cursor || '';
    renderConvs();
    if (state.room) { renderRoomHead(); applyReceipts(); }
  }).catch(function (err) { if (err.status === 401) { logout('Your session ended; log in again.'); } });
}

// listEntries takes entries of the REST list: names, roles, peers' read marks, and counters that
// the channel's (applyCounters) then replace.
function listEntries(list) {
  list.forEach(function (c) {
    var entry = conversationFrom(c);
    var had = state.convs.get(entry.topic);
    if (had) { ['lastSeq', 'readSeq', 'unread', 'mentions', 'last'].forEach(function (k) { entry[k] = had[k]; }); }
    var open = state.room && state.room.topic === entry.topic;
    if (open) { entry.unread = 0; entry.mentions = 0; }
    state.convs.set(entry.topic, entry);
    if (entry.kind === 'direct') { learnName(entry.peer); learnPresence(entry.peer); }
  });
}

// onConversations takes the list the channel (re)read: at the start, after a reconnect (the
// conversations active since), after a resync (all of them), and a second after each (recheck:
// the conversations active around that read).
function onConversations(e) {
  if (e.reason === 'start' || e.reason === 'resync') { // the whole list; reconnect and recheck read the active ones
    var seen = new Set(e.entries.map(function (c) { return c.topic; }));
    // Keep entries the server does not list yet (a group just created, a chat just opened).
    state.convs.forEach(function (c, topic) { if (!seen.has(topic) && !c.local) { state.convs.delete(topic); } });
  }
  listEntries(e.entries);
  e.conversations.forEach(function (st) { var c = state.convs.get(st.topic); if (c) { applyCounters(c, st); } });
  renderConvs();
  if (state.room) { renderRoomHead(); applyReceipts(); }
  if (!listedOnce) { listedOnce = true; firstListed(); }
}

// onConversation takes a conversation whose counters or last message the channel moved (a
// message, a recall, a read mark, a new chat or group), or that the user is no longer in.
function onConversation(st) {
  if (st.removed) {
    if (state.convs.delete(st.topic)) { renderConvs(); }
    return;
  }
  var c = state.convs.get(st.topic);
  if (!c) {
    c = localConv(st.topic);
    if (c.kind === 'group') { learnGroupName(c); } else { learnName(c.peer); learnPresence(c.peer); }
  }
  applyCounters(c, st);
  renderConvs();
}

// applyCounters copies the channel's state of a conversation into its entry; the open one shows
// no badge (the page marks what it shows read).
function applyCounters(c, st) {
  c.lastSeq = Number(st.lastSeq) || 0;
  c.readSeq = Number(st.readSeq) || 0;
  var open = state.room && state.room.topic === c.topic && document.visibilityState === 'visible';
  c.unread = open ? 0 : st.unread;
  c.mentions = open ? 0 : st.mentions;
  if (st.lastMessage) { c.last = lastFrom(st.lastMessage); }
  if (st.activeAt && st.activeAt > c.activeAt) { c.activeAt = st.activeAt; }
}

el.convsMore.addEventListener('click', function () { loadConversations(state.convCursor); });

function convTitle(c) {
  if (c.kind === 'group') { return c.name || 'Group ' + c.groupId; }
  return displayName(c.peer);
}

function sortedConvs() {
  return Array.from(state.convs.values()).sort(function (a, b) {
    if (a.activeAt !== b.activeAt) { return a.activeAt < b.activeAt ? 1 : -1; }
    return a.topic < b.topic ? -1 : 1;
  });
}

function renderConvs() {
  var items = sortedConvs().map(function (c) {
    var li = node('li');
    var b = node('button');
    b.type = 'button';
    b.dataset.topic = c.topic;
    var name = node('span', 'name');
    if (c.kind === 'direct') { name.appendChild(dot(c.peer)); }
    name.appendChild(document.createTextNode(convTitle(c)));
    var last = node('span', 'last', c.last ? (c.last.from === state.userId ? 'You: ' : '') + c.last.text : 'No messages yet');
    var side = node('span', 'side');
    side.appendChild(node('span', 'when', c.last ? formatTime(c.last.ts) : ''));
    var label = convTitle(c);
    if (c.unread > 0) {
      var badge = node('span', 'badge', c.unread > 99 ? '99+' : String(c.unread));
      badge.setAttribute('aria-hidden', 'true');
      side.appendChild(badge);
      label += ', ' + c.unread + ' unread';
    }
    if (c.mentions > 0) {
      var m = node('span', 'badge mention', '@' + c.mentions);
      m.setAttribute('aria-hidden', 'true');
      side.appendChild(m);
      label += ', ' + c.mentions + (c.mentions === 1 ? ' mention' : ' mentions');
    }
    if (c.last) { label += '. Last: ' + c.last.text; }
    b.setAttribute('aria-label', label);
    if (state.room && state.room.topic === c.topic) { b.setAttribute('aria-current', 'true'); }
    b.append(name, last, side);
    b.addEventListener('click', function () { go(c.topic); });
    li.appendChild(b);
    return li;
  });
  var focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.topic : '';
  el.convs.replaceChildren.apply(el.convs, items);
  if (focused) {
    var again = el.convs.querySelector('button[data-topic="' + focused + '"]');
    if (again) { again.focus(); }
  }
  el.convsEmpty.hidden = items.length > 0;
  el.convsMore.hidden = !state.convCursor;
}

// localConv adds an entry the server does not list yet.
function localConv(topic, extra) {
  var c = state.convs.get(topic);
  if (c) { return c; }
  c = {
    topic: topic, kind: isGroup(topic) ? 'group' : 'direct', groupId: isGroup(topic) ? groupOf(topic) : '',
    name: '', role: '', memberCount: 0, peer: isGroup(topic) ? '' : peerOf(topic), lastSeq: 0, readSeq: 0,
    unread: 0, mentions: 0, peerReadSeq: 0, last: null, activeAt: new Date().toISOString(), local: true
  };
  Object.assign(c, extra || {});
  state.convs.set(topic, c);
  renderConvs();
  return c;
}

// ---- groups and friends ----------------------------------------------------------------------

el.createForm.addEventListener('submit', function (ev) {
  ev.preventDefault();
  var name = el.groupName.value.trim();
  setText(el.sideError, '');
  if (!name) { setText(el.sideError, 'Name the new group.'); el.groupName.focus(); return; }
  request('POST', api.groups, { name: name }).then(function (data) {
    var topic = 'grp' + data.group_id;
    el.groupName.value = '';
    el.groupsBox.open = false;
    localConv(topic, { name: name, role: 'owner', memberCount: 1 });
    go(topic);
  }).catch(function (err) { sideError('Could not create the group: ', err); });
});

el.joinForm.addEventListener('submit', function (ev) {
  ev.preventDefault();
  var gid = el.groupId.value.trim().replace(/^grp/, '');
  setText(el.sideError, '');
  if (!/^[1-9][0-9]{0,18}$/.test(gid)) { setText(el.sideError, 'A group id is a positive number.'); el.groupId.focus(); return; }
  joinGroup(gid).then(function () { el.groupId.value = ''; el.groupsBox.open = false; go('grp' + gid); })
    .catch(function (err) { sideError('Could not join group ' + gid + ': ', err); });
});

function joinGroup(gid) {
  return request('POST', '/v1/im/groups/' + encodeURIComponent(gid) + '/join').catch(function (err) {
    if (err.details && err.details.reason === 'already_member') { return {}; }
    throw err;
  }).then(function () { localConv('grp' + gid, { role: 'member' }); });
}

el.friendForm.addEventListener('submit', function (ev) {
  ev.preventDefault();
  var uid = el.friendId.value.trim();
  setText(el.sideError, '');
  if (!/^[1-9][0-9]{0,18}$/.test(uid) || uid === state.userId) {
    setText(el.sideError, 'A user id is the positive number another user sees after "your user id".');
    el.friendId.focus();
    return;
  }
  request('POST', api.friendRequests, { user_id: uid }).then(function () {
    el.friendId.value = '';
    setText(el.sideError, 'Asked ' + displayName(uid) + ' to be friends.');
    setTimeout(loadFriends, 500);
  }).catch(function (err) { sideError('Could not ask ' + uid + ': ', err); });
});

function loadFriends() {
  var session = state.token;
  Promise.all([request('GET', api.friends), request('GET', api.friendRequests)]).then(function (r) {
    if (state.token !== session) { return; }
    // The lists come from the read model, which may not have the answers given here yet: an
    // answer stays shown as given until the read model has it, or for 30 s.
    var now = Date.now();
    Object.keys(answered).forEach(function (uid) { if (answered[uid].until < now) { delete answered[uid]; } });
    state.friends = (r[0].user_ids || []).map(String);
    Object.keys(answered).forEach(function (uid) {
      if (answered[uid].what !== 'accept') { return; }
      if (state.friends.indexOf(uid) >= 0) { delete answered[uid]; } else { state.friends.push(uid); }
    });
    state.requests = (r[1].requests || []).filter(function (q) { return !answered[String(q.user_id)]; });
    state.friends.forEach(function (uid) { learnName(uid); learnPresence(uid); });
    state.requests.forEach(function (q) { learnName(q.user_id); });
    renderFriends();
  }).catch(function (err) { if (err.status === 401) { logout('Your session ended; log in again.'); } });
}

var friendsShown = '';
function renderFriends() {
  // Re-render only on a change, so a poll never takes the focus from a button.
  var shown = JSON.stringify([state.friends, state.requests, state.friends.map(displayName),
    state.requests.map(function (q) { return displayName(q.user_id); })]);
  if (shown === friendsShown) { return; }
  friendsShown = shown;
  var incoming = state.requests.filter(function (q) { return q.direction === 'incoming'; });
  el.requestsBadge.hidden = incoming.length === 0;
  setText(el.requestsBadge, incoming.length);
  el.requestsBadge.setAttribute('aria-label', incoming.length + ' friend requests');
  if (incoming.length > 0 && !el.friendsBox.dataset.opened) { el.friendsBox.open = true; el.friendsBox.dataset.opened = '1'; }
  el.requests.replaceChildren.apply(el.requests, state.requests.length ? state.requests.map(function (q) {
    var li = node('li');
    var who = displayName(q.user_id);
    li.appendChild(node('span', 'grow', q.direction === 'incoming' ? who + ' asks to be friends' : 'You asked ' + who));
    if (q.direction === 'incoming') {
      li.appendChild(button('Accept', '', function () { answerRequest(q.user_id, 'accept'); }, 'Accept ' + who));
      li.appendChild(button('Decline', 'quiet', function () { answerRequest(q.user_id, 'decline'); }, 'Decline ' + who));
    }
    return li;
  }) : [node('li', 'hint', 'None')]);
  el.friends.replaceChildren.apply(el.friends, state.friends.length ? state.friends.map(function (uid) {
    var li = node('li');
    var name = node('span', 'grow');
    name.append(dot(uid), document.createTextNode(displayName(uid)));
    li.appendChild(name);
    li.appendChild(button('Chat', 'quiet', function () { go(directTopic(state.userId, uid)); }, 'Chat with ' + displayName(uid)));
    return li;
  }) : [node('li', 'hint', 'None yet')]);
}

// answered holds the friend requests answered on this page, by user id: {what, until}.
var answered = {};

function answerRequest(uid, what) {
  request('POST', api.friendRequests + '/' + encodeURIComponent(uid) + '/' + what).then(function () {
    answered[uid] = { what: what, until: Date.now() + 30000 };
    state.requests = state.requests.filter(function (q) { return q.user_id !== uid; });
    if (what === 'accept' && state.friends.indexOf(uid) < 0) { state.friends.push(uid); learnPresence(uid); }
    renderFriends();
    setTimeout(loadFriends, 800);
  }).catch(function (err) { sideError('Could not ' + what + ': ', err); });
}

// ---- opening a conversation ----------------------------------------------------------------

// go opens topic through the URL's hash, so the address names the open conversation.
function go(topic) {
  if (location.hash === '#' + topic) { openConversation(topic); } else { location.hash = topic; }
}

window.addEventListener('hashchange', function () { if (state.token) { openFromHash(); } });

function hashTopic() {
  var t = decodeURIComponent(location.hash.replace(/^#/, ''));
  return TOPIC_RE.test(t) ? t : '';
}

function openFromHash() {
  var t = hashTopic();
  if (!t) { return false; }
  if (!isGroup(t) && t.slice(3).split('_').indexOf(state.userId) < 0) {
    setText(el.sideError, 'That link is a chat between two other users.');
    return false;
  }
  if (!state.room || state.room.topic !== t) { openConversation(t); }
  return true;
}

function showLinkHint() {
  var t = hashTopic();
  el.loginLinkHint.hidden = !t || !isGroup(t);
  if (t && isGroup(t)) { setText(el.loginLinkHint, 'Log in to open group ' + groupOf(t) + ' from your link.'); }
}

function closeRoom() {
  leaveRoomState();
  el.roomOpen.hidden = true; el.roomEmpty.hidden = false;
  el.membersBox.hidden = true;
  el.chatView.classList.add('no-members');
}

function leaveRoomState() {
  if (state.room) { state.room.typing.forEach(function (t) { clearTimeout(t); }); }
  state.room = null; state.topic = '';
  el.messages.replaceChildren(); el.members.replaceChildren();
  setText(el.typing, ''); setText(el.sendStatus, '');
  el.olderBtn.hidden = true; el.joinBanner.hidden = true;
  cancelEdit();
}

function openConversation(topic) {
  leaveRoomState();
  state.room = newRoom(topic); state.topic = topic;
  el.roomEmpty.hidden = true; el.roomOpen.hidden = false;
  var c = state.convs.get(topic);
  if (!c && !isGroup(topic)) { c = localConv(topic); }
  state.room.member = !!c;
  if (c) { c.unread = 0; c.mentions = 0; }
  renderConvs();
  renderRoomHead();
  if (isGroup(topic)) {
    el.membersBox.hidden = false; el.chatView.classList.remove('no-members');
    loadMembers(topic);
    if (!c) { offerJoin(topic); } else if (!c.name) { learnGroupName(c); }
  } else {
    el.membersBox.hidden = true; el.chatView.classList.add('no-members');
    learnName(peerOf(topic)); learnPresence(peerOf(topic));
  }
  if (state.room.member) { startRoom(topic); }
}

// startRoom shows the open conversation's messages: the latest page, once subscribed; the SDK
// delivers what comes after it, catching up after every reconnect.
function startRoom(topic) {
  if (client) { loadLatest(topic, subscribeTopic(topic, true)); }
  el.message.focus();
}

function renderRoomHead() {
  var r = state.room;
  if (!r) { return; }
  var c = state.convs.get(r.topic);
  if (isGroup(r.topic)) {
    el.roomDot.hidden = true;
    setText(el.roomName, c && c.name ? c.name : 'Group ' + groupOf(r.topic));
    var sub = 'Group ' + groupOf(r.topic);
    if (c && c.memberCount) { sub += ' · ' + c.memberCount + (c.memberCount === 1 ? ' member' : ' members'); }
    if (c && c.role) { sub += ' · you are ' + c.role; }
    setText(el.roomSub, sub);
    el.share.hidden = false;
    el.shareLink.value = location.origin + location.pathname + '#' + r.topic;
  } else {
    var peer = peerOf(r.topic);
    el.roomDot.hidden = false; el.roomDot.dataset.user = peer;
    setText(el.roomName, displayName(peer));
    setText(el.roomSub, 'Chat with user ' + peer);
    el.share.hidden = true;
    renderPresence();
  }
  el.messageLabel.textContent = r.editing ? 'Edit message #' + r.editing : 'Message to ' + el.roomName.textContent;
  el.message.disabled = !r.member; el.sendBtn.disabled = !r.member;
}

el.shareCopy.addEventListener('click', function () {
  el.shareLink.select();
  var done = function () { setText(el.sendStatus, 'Link copied: ' + el.shareLink.value); };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(el.shareLink.value).then(done, function () { setText(el.sendStatus, 'Press Ctrl+C to copy the selected link.'); });
  } else {
    setText(el.sendStatus, 'Press Ctrl+C to copy the selected link.');
  }
});

// learnGroupName fills in the name of a group the list does not name yet (just joined).
function learnGroupName(c) {
  readLagging(api.group(c.groupId), function () { return state.convs.get(c.topic) === c; }).then(function (g) {
    if (g.name && !c.name) { c.name = g.name; c.memberCount = c.memberCount || g.member_count; renderConvs(); renderRoomHead(); }
  }).catch(function () { /* the id is name enough */ });
}

// offerJoin shows a group the user is not a member of (a shared link): its name and a button.
function offerJoin(topic) {
  el.joinBanner.hidden = false;
  setText(el.joinBannerText, 'You are not a member of group ' + groupOf(topic) + '.');
  readLagging(api.group(groupOf(topic)), function () { return state.topic === topic; }).then(function (g) {
    if (!state.room || state.room.topic !== topic) { return; }
    setText(el.roomName, g.name);
    setText(el.joinBannerText, 'You are not a member of “' + g.name + '” (' + g.member_count + ' members).');
  }).catch(function (err) {
    if (err.status === 404) { setText(el.joinBannerText, 'Group ' + groupOf(topic) + ' does not exist (yet).'); }
  });
  el.joinBannerBtn.focus();
}

el.joinBannerBtn.addEventListener('click', function () {
  var topic = state.topic;
  if (!topic) { return; }
  joinGroup(groupOf(topic)).then(function () {
    el.joinBanner.hidden = true;
    openConversation(topic);
  }).catch(function (err) { setText(el.joinBannerText, 'Could not join: ' + describe(err)); });
});

// loadMembers reads and shows the member list of topic; it resolves to the list, or to null
// when the list could not be read or the room was left meanwhile.
function loadMembers(topic) {
  return readLagging(api.members(groupOf(topic)), function () { return state.topic === topic; }).then(function (data) {
    if (state.topic !== topic) { return null; }
    state.room.members = data.members || [];
    state.room.members.forEach(function (m, i) {
      learnName(m.user_id);
      if (i < PRESENCE_LOOKUPS) { learnPresence(m.user_id); } // the rest wait for pres frames
    });
    var c = state.convs.get(topic);
    var me = state.room.members.find(function (m) { return String(m.user_id) === state.userId; });
    if (me && !state.room.member) { c = becomeMember(topic); }
    if (c) {
      c.memberCount = state.room.members.length;
      if (me) { c.role = me.role; }
      renderRoomHead();
    }
    renderMembers();
    return state.room.members;
  }).catch(function () {
    if (state.topic === topic) { el.members.replaceChildren(node('li', 'hint', 'Members are shown to members only.')); }
    return null;
  });
}

// becomeMember opens topic as the user's own group when the member list names the user but
// the conversation list does not list the group yet (it trails a join, e.g. across a reload).
function becomeMember(topic) {
  var c = localConv(topic);
  state.room.member = true;
  el.joinBanner.hidden = true;
  if (!c.name) { learnGroupName(c); }
  renderRoomHead();
  startRoom(topic);
  return c;
}

// refreshMembers reloads the member list of topic after a change the list's read model trails,
// by seconds on a busy node: now, then on the steps of MEMBER_REFRESH (30 s in all), until the
// list shows every change waited for (settled(list) holds), or to the last step for a change
// it cannot check (no settled). The open room has one refresher: a change made meanwhile joins
// it and starts the steps again, and loads are at least MEMBER_LOAD_GAP apart and never two at
// once, so a burst of changes in a big group costs a few loads, not a few per change.
var MEMBER_REFRESH = [0, 1000, 3000, 7000, 15000, 30000];
var MEMBER_LOAD_GAP = 500;
var memberRefresh = null;
function refreshMembers(topic, settled) {
  var m = memberRefresh;
  if (!m || m.topic !== topic) {
    if (m) { clearTimeout(m.timer); }
    m = memberRefresh = { topic: topic, waits: [], blind: false, timer: 0, busy: false, again: false, lastStart: 0 };
  }
  if (settled) { m.waits.push(settled); } else { m.blind = true; }
  m.step = 1; // the steps start again after every change
  loadMembersAfter(m, m.lastStart + MEMBER_LOAD_GAP - Date.now());
}

// loadMembersAfter has m load the list in ms (now when ms <= 0), instead of when it would have.
function loadMembersAfter(m, ms) {
  clearTimeout(m.timer);
  m.timer = 0;
  if (ms <= 0) { runMemberRefresh(m); return; }
  m.timer = setTimeout(function () { m.timer = 0; runMemberRefresh(m); }, ms);
}

function runMemberRefresh(m) {
  if (memberRefresh !== m || state.topic !== m.topic) { return; }
  if (m.busy) { m.again = true; return; }
  m.busy = true;
  m.lastStart = Date.now();
  loadMembers(m.topic).then(function (list) {
    m.busy = false;
    if (list) { m.waits = m.waits.filter(function (w) { return !w(list); }); }
    if (m.again) { m.again = false; loadMembersAfter(m, m.lastStart + MEMBER_LOAD_GAP - Date.now()); return; }
    if (m.timer) { return; } // a change came meanwhile: its load is due
    if ((!m.waits.length && !m.blind) || m.step >= MEMBER_REFRESH.length) {
      if (memberRefresh === m) { memberRefresh = null; }
      return;
    }
    loadMembersAfter(m, MEMBER_REFRESH[m.step] - MEMBER_REFRESH[m.step - 1]);
    m.step++;
  });
}

// listed returns a settled test for refreshMembers: whether uid is on the list (want true) or
// off it (want false).
function listed(uid, want) {
  return function (list) { return list.some(function (m) { return String(m.user_id) === uid; }) === want; };
}

function renderMembers() {
  var r = state.room;
  if (!r || !isGroup(r.topic)) { return; }
  el.members.replaceChildren.apply(el.members, r.members.map(function (m) {
    var uid = String(m.user_id);
    var li = node('li');
    li.dataset.user = uid;
    var name = node('span', 'grow');
    name.append(dot(uid), document.createTextNode(displayName(uid)));
    li.append(name, node('span', 'role', m.role));
    return li;
  }));
  var c = state.convs.get(r.topic);
  el.leaveBtn.hidden = !c || c.role === 'owner' || !r.member;
}

el.leaveBtn.addEventListener('click', function () {
  var topic = state.topic;
  request('POST', '/v1/im/groups/' + groupOf(topic) + '/leave').then(function () {
    state.convs.delete(topic);
    location.hash = '';
    closeRoom();
    renderConvs();
  }).catch(function (err) { setText(el.sendStatus, 'Could not leave: ' + describe(err)); });
});

// ---- messages ------------------------------------------------------------------------------

function messageItem(from, text) {
  learnName(from);
  var li = node('li');
  li.dataset.from = from;
  if (from === state.userId) { li.classList.add('mine'); }
  var meta = node('span', 'meta');
  meta.append(node('span', 'seq'), node('time', 'ts'), node('span', 'edited'), node('span', 'state'), node('span', 'ops'));
  li.append(node('span', 'from', displayName(from)), node('span', 'text', text), meta);
  return li;
}

function setSeq(li, seq) {
  li.dataset.seq = String(seq);
  setText(li.querySelector('.seq'), '#' + seq);
  renderOps(li);
}

function setTime(li, ts) {
  var t = li.querySelector('.ts');
  if (ts) { t.dateTime = ts; setText(t, formatTime(ts)); }
}

// renderOps gives a committed message its actions: edit and recall for one's own messages,
// delete-for-me for every message.
function renderOps(li) {
  var ops = li.querySelector('.ops');
  var seq = Number(li.dataset.seq);
  if (!seq) { ops.replaceChildren(); return; }
  var list = [];
  if (li.dataset.from === state.userId && !li.classList.contains('recalled')) {
    list.push(button('Edit', 'quiet op-edit', function () { startEdit(seq); }, 'Edit message #' + seq));
    list.push(button('Recall', 'quiet op-recall', function (ev) { recall(seq, ev.currentTarget); }, 'Recall message #' + seq + ' for everyone'));
  }
  list.push(button('Delete', 'quiet op-delete', function () { deleteForMe(seq); }, 'Delete message #' + seq + ' for me'));
  ops.replaceChildren.apply(ops, list);
}

function markRecalled(li) {
  li.classList.add('recalled');
  setText(li.querySelector('.text'), '(message recalled)');
  setText(li.querySelector('.edited'), '');
  renderOps(li);
}

function place(li, seq) {
  var stick = nearBottom();
  var next = null;
  var items = el.messages.children;
  for (var i = 0; i < items.length; i++) {
    var s = items[i].dataset.seq;
    if (s === undefined || Number(s) > seq) { next = items[i]; break; }
  }
  el.messages.insertBefore(li, next);
  var r = state.room;
  r.bySeq.set(seq, li);
  if (!r.minSeq || seq < r.minSeq) { r.minSeq = seq; }
  if (seq > r.maxSeq) { r.maxSeq = seq; }
  if (stick) { el.messages.scrollTop = el.messages.scrollHeight; }
}

function nearBottom() {
  return el.messages.scrollHeight - el.messages.scrollTop - el.messages.clientHeight < 40;
}

// onData shows a message of the open conversation (once: a seq already shown only updates its
// item); the list's counters are the channel's (onConversation).
function onData(d, live) {
  var seq = Number(d.seq);
  if (!(seq > 0)) { return; }
  var from = String(d.from);
  var r = state.room;
  if (!r || d.topic !== r.topic || marked(state.deleted, d.topic, seq)) { return; }
  if (marked(state.recalled, d.topic, seq)) { d.status = 'recalled'; }
  var text = messageText(d);
  var li = r.bySeq.get(seq);
  if (li) {
    if (d.status === 'recalled' || li.classList.contains('recalled')) { markRecalled(li); } else { setText(li.querySelector('.text'), text); }
    setTime(li, d.ts);
    return;
  }
  if (live && r.typing.has(from)) { clearTimeout(r.typing.get(from)); r.typing.delete(from); renderTyping(); }
  li = messageItem(from, text);
  if (d.status === 'recalled') { li.classList.add('recalled'); }
  if (live) { li.dataset.version = '1'; } // a live data frame is a message as sent
  setSeq(li, seq);
  setTime(li, d.ts);
  place(li, seq);
  applyReceipts();
  markRead();
}

function markRead() {
  var r = state.room;
  if (!r || document.visibilityState !== 'visible' || r.maxSeq <= r.readSent || !client || !r.member) { return; }
  r.readSent = r.maxSeq;
  client.markRead(r.topic, r.maxSeq); // kept while disconnected, sent after the next login
  var c = state.convs.get(r.topic);
  if (c) {
    c.readSeq = Math.max(c.readSeq, r.maxSeq);
    if (c.unread || c.mentions) { c.unread = 0; c.mentions = 0; renderConvs(); }
  }
}
document.addEventListener('visibilitychange', function () { markRead(); });

// applyReceipts marks the user's own messages the other party of a 1:1 chat has read.
function applyReceipts() {
  var r = state.room;
  if (!r || isGroup(r.topic)) { return; }
  var c = state.convs.get(r.topic);
  var upTo = c ? c.peerReadSeq : 0;
  r.bySeq.forEach(function (li, seq) {
    if (li.dataset.from === state.userId && seq <= upTo) {
      li.classList.add('seen');
      setText(li.querySelector('.state'), 'seen');
    }
  });
}

el.olderBtn.addEventListener('click', loadOlder);
el.messages.addEventListener('scroll', function () {
  if (el.messages.scrollTop < 30 && !el.olderBtn.hidden && !el.olderBtn.disabled) { loadOlder(); }
});

function loadOlder() {
  var r = state.room;
  var sub = r && client && client.subscription(r.topic);
  if (!r || !r.minSeq || !sub) { return; }
  el.olderBtn.disabled = true;
  var top = el.messages.firstElementChild;
  var topic = r.topic;
  sub.older({ limit: HISTORY_PAGE })
    .then(function (page) {
      if (state.topic !== topic) { return; }
      page.messages.forEach(function (m) { onData(m, false); });
      el.olderBtn.hidden = !page.hasMore;
      if (top) { top.scrollIntoView(); }
    })
    .catch(function (err) { setText(el.sendStatus, 'Could not load older messages: ' + err.message); })
    .finally(function () { el.olderBtn.disabled = false; });
}

// ---- edit, recall, delete for me -----------------------------------------------------------

function startEdit(seq) {
  var r = state.room;
  var li = r && r.bySeq.get(seq);
  if (!li) { return; }
  cancelEdit();
  r.editing = seq;
  li.classList.add('editing');
  el.message.value = li.querySelector('.text').textContent;
  el.cancelEditBtn.hidden = false;
  setText(el.sendBtn, 'Save');
  renderRoomHead();
  el.message.focus();
}

function cancelEdit() {
  var r = state.room;
  if (r && r.editing) {
    var li = r.bySeq.get(r.editing);
    if (li) { li.classList.remove('editing'); }
    r.editing = 0;
    el.message.value = '';
  }
  el.cancelEditBtn.hidden = true;
  setText(el.sendBtn, 'Send');
  if (r) { renderRoomHead(); }
}
el.cancelEditBtn.addEventListener('click', function () { cancelEdit(); el.message.focus(); });

// saveEdit edits a message with the content version the page last saw of it, so an edit made
// elsewhere meanwhile is refused (409) rather than overwritten. The page knows the version of a
// message that arrived live (1) or whose edit it was told of; for any other it reads the version
// from history, which trails the commits by a moment: a message shown live may not be there yet,
// so a missing one is asked for again with growing pauses before the edit gives up.
function saveEdit(seq, text) {
  var topic = state.topic;
  var li = state.room && state.room.bySeq.get(seq);
  var known = li && li.dataset.version;
  (known ? Promise.resolve(known) : storedVersion(topic, seq, 0)).then(function (version) {
    return request('PATCH', api.message(topic, seq), { version: version, content: text });
  }).then(function (changed) {
    var li = state.room && state.room.topic === topic && state.room.bySeq.get(seq);
    if (li) {
      setText(li.querySelector('.text'), text); setText(li.querySelector('.edited'), '(edited)');
      if (changed && changed.version) { li.dataset.version = String(changed.version); }
    }
    setText(el.sendStatus, 'Edited #' + seq);
    cancelEdit();
  }).catch(function (err) { setText(el.sendStatus, 'Could not edit #' + seq + ': ' + describe(err)); });
}

function storedVersion(topic, seq, tries) {
  return request('GET', api.messages(topic) + '?before_seq=' + (seq + 1) + '&limit=1').then(function (page) {
    var m = (page.messages || [])[0];
    if (m && Number(m.seq) === seq) { return String(m.version); }
    if (tries + 1 >= LAG_RETRIES || state.topic !== topic) { throw new Error('the message is gone'); }
    return new Promise(function (resolve) { later(tries, resolve); })
      .then(function () { return storedVersion(topic, seq, tries + 1); });
  });
}

// recall asks for a second click within a few seconds before it recalls.
function recall(seq, b) {
  if (!b.dataset.armed) {
    b.dataset.armed = '1';
    setText(b, 'Confirm recall');
    setTimeout(function () { if (b.isConnected) { delete b.dataset.armed; setText(b, 'Recall'); } }, 4000);
    return;
  }
  var topic = state.topic;
  request('POST', api.message(topic, seq) + '/recall').then(function () {
    var li = state.room && state.room.topic === topic && state.room.bySeq.get(seq);
    if (li) { markRecalled(li); }
    setText(el.sendStatus, 'Recalled #' + seq);
  }).catch(function (err) { setText(el.sendStatus, 'Could not recall #' + seq + ': ' + describe(err)); });
}

function deleteForMe(seq) {
  var topic = state.topic;
  request('DELETE', api.message(topic, seq)).then(function () {
    remember(state.deleted, topic, seq);
    var r = state.room;
    var li = r && r.topic === topic && r.bySeq.get(seq);
    if (li) {
      var next = li.nextElementSibling || li.previousElementSibling;
      li.remove();
      r.bySeq.set(seq, li); // still known, so a later page does not bring it back
      var focus = next && next.querySelector('button');
      (focus || el.message).focus();
    }
    setText(el.sendStatus, 'Deleted #' + seq + ' for you');
  }).catch(function (err) { setText(el.sendStatus, 'Could not delete #' + seq + ': ' + describe(err)); });
}

// ---- sending and typing --------------------------------------------------------------------

el.message.addEventListener('keydown', function (ev) {
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    el.sendForm.requestSubmit();
  } else if (ev.key === 'Escape' && state.room && state.room.editing) {
    ev.preventDefault();
    cancelEdit();
  }
});

el.message.addEventListener('input', function () {
  var r = state.room;
  var sub = r && client && client.subscription(r.topic);
  if (!r || !r.member || r.editing || !el.message.value || !sub || sub.state !== 'active') { return; }
  if (Date.now() - r.lastTyping < TYPING_EVERY_MS) { return; }
  r.lastTyping = Date.now();
  client.typing(r.topic);
});

el.sendForm.addEventListener('submit', function (ev) {
  ev.preventDefault();
  var r = state.room;
  var text = el.message.value;
  if (!text.trim() || !r || !r.member) { return; }
  if (r.editing) { saveEdit(r.editing, text); return; }
  el.message.value = '';
  var cmid = 'web-' + randomId();
  var li = messageItem(state.userId, text);
  li.classList.add('pending');
  li.dataset.cmid = cmid;
  setText(li.querySelector('.state'), 'sending…');
  el.messages.appendChild(li);
  el.messages.scrollTop = el.messages.scrollHeight;
  sending.set(cmid, { li: li, topic: r.topic });
  client.send(r.topic, text, { clientMsgId: cmid, msgType: 'text' })
    .then(function (ack) { acked(cmid, ack); }, function (err) { notSent(cmid, err); });
});

// sending holds the items of messages the SDK's outbox has not had acked yet. The SDK sends each
// when connected (after subscribing), and after a lost connection or a retryable refusal sends it
// again with the same client_msg_id, so the server stores it once whatever became of the first
// attempt.
var sending = new Map(); // client_msg_id -> {li, topic}

function onOutbox(entry) {
  var m = sending.get(entry.clientMsgId);
  if (m && (entry.status === 'retrying' || (entry.status === 'queued' && entry.attempts > 0))) {
    setText(m.li.querySelector('.state'), 'waiting to resend…');
  }
}

function notSent(cmid, err) {
  var m = sending.get(cmid);
  sending.delete(cmid);
  if (!m || err.name === 'ClientClosedError') { return; }
  m.li.classList.add('failed');
  setText(m.li.querySelector('.state'), 'not sent: ' + err.message);
  setText(el.sendStatus, 'Message not sent: ' + err.message);
}

function acked(cmid, ack) {
  var m = sending.get(cmid);
  sending.delete(cmid);
  var r = state.room;
  if (!m || !r || r.topic !== m.topic) { return; }
  var seq = Number(ack.seq);
  var li = m.li;
  li.classList.remove('pending');
  setText(li.querySelector('.state'), ack.duplicate ? 'sent (again)' : 'sent');
  setText(el.sendStatus, 'Sent as #' + seq + (ack.duplicate ? ' (already stored)' : ''));
  var shown = r.bySeq.get(seq);
  if (shown) {
    // The data frame came first: keep that item and mark it as acknowledged.
    li.remove();
    if (!shown.classList.contains('seen')) { setText(shown.querySelector('.state'), 'sent'); }
    return;
  }
  if (!ack.duplicate) { li.dataset.version = '1'; } // as sent; a stored duplicate may have been edited since
  setSeq(li, seq);
  setTime(li, ack.ts);
  place(li, seq);
}

// ---- WebSocket, through the SDK --------------------------------------------------------------

var client = null; // the SDK's Client of the logged-in session

// startClient connects a new Client for the session's token and routes its events to the page.
function startClient() {
  stopClient();
  var c = new Client({
    url: gatewayUrl(),
    token: function () { return state.token; },
    ua: 'imledger-web/1 ' + navigator.userAgent.slice(0, 200),
    rest: rest // the channel's counters start from the conversation list
  });
  client = c;
  var mine = function (f) { return function (e) { if (client === c) { f(e); } }; };
  c.on('state', mine(onState));
  c.on('ready', mine(onReady));
  c.on('message', mine(function (m) { onData(m, m.live); }));
  c.on('update', mine(onInfo));
  c.on('typing', mine(function (t) { onInfo({ topic: t.topic, from: t.user, what: 'kp' }); }));
  c.on('receipt', mine(function (r) { onInfo({ topic: r.topic, from: r.user, what: r.what, seq: r.seq }); }));
  c.on('change', mine(onInfo));
  c.on('presence', mine(function (p) { onPres({ topic: p.topic, src: p.user, what: p.online ? 'on' : 'off' }); }));
  c.on('unsubscribed', mine(function (u) {
    if (u.error && state.room && state.room.topic === u.topic) { setText(el.sendStatus, 'Could not open the conversation: ' + u.error.message); }
  }));
  c.on('outbox', mine(function (e) { onOutbox(e.entry); }));
  c.on('conversations', mine(onConversations));
  c.on('conversation', mine(onConversation));
  c.on('chat', mine(function (e) { learnName(e.peer); }));
  c.on('friend', mine(function (e) { onInfo({ topic: e.topic, what: e.what, from: e.from, src: e.src }); }));
  c.on('block', mine(function (e) { onInfo({ topic: e.topic, what: e.what, from: e.from, src: e.src }); }));
  c.on('membership', mine(function (e) { onInfo({ topic: e.topic, what: e.what, from: e.from, src: e.src }); }));
  c.on('resync', mine(function () { loadFriends(); })); // the items lost were about these too
  c.on('session_revoked', mine(function () { logout('This session was signed out (from another device, or everywhere); log in again.'); }));
  c.connect();
}

function stopClient() {
  var c = client;
  client = null;
  sending.clear();
  if (c) { c.close(); }
}

// onState shows the connection's state; a session the server ended (an expired or revoked
// token, a ban) logs out.
function onState(e) {
  switch (e.state) {
    case 'connecting':
      setText(el.conn, e.attempt ? 'Reconnecting…' : 'Connecting…');
      break;
    case 'ready':
      setText(el.conn, 'Connected');
      break;
    case 'waiting':
      setText(el.conn, e.delayMs === undefined ? 'Disconnected; waiting for the network'
        : 'Disconnected; reconnecting in ' + Math.max(1, Math.ceil(e.delayMs / 1000)) + ' s');
      break;
    case 'closed':
      logout('Your session ended; log in again.');
      break;
  }
}

// onReady runs after every login of the connection: the SDK resubscribed and catches up, its
// channel re-reads the conversations active meanwhile; the page refreshes the friends list, which
// may miss a change made while it was away that the read model does not have yet.
function onReady() {
  if (state.room && state.room.member) { subscribeTopic(state.room.topic, true); }
  settleFriends();
}

// settleFriends reads the friend lists now and four more times over 15 s: they come from a read
// model that trails a change (by seconds on a busy node), and the change itself came, or went by,
// on the channel.
function settleFriends() {
  [0, 1000, 3000, 7000, 15000].forEach(function (ms) { setTimeout(function () { if (state.token) { loadFriends(); } }, ms); });
}

// subscribeTopic returns the subscription to topic, subscribing if there is none: live messages
// only for the list, with catch-up for the open conversation (open). The SDK asks again while the
// read models do not know a new group or membership yet.
function subscribeTopic(topic, open) {
  var sub = client.subscription(topic);
  if (!sub) {
    sub = client.subscribe(topic, { catchUp: open });
    sub.ready().then(function () {
      var c = state.convs.get(topic);
      if (c && c.kind === 'direct') { learnPresence(c.peer); }
    }, function () { /* reported as unsubscribed */ });
  } else if (open) {
    sub.startCatchUp();
  }
  return sub;
}

// loadLatest shows the latest page of the open conversation (its newer messages come as events).
function loadLatest(topic, sub) {
  sub.latest({ limit: HISTORY_PAGE }).then(function (page) {
    if (state.topic !== topic) { return; }
    page.messages.forEach(function (m) { onData(m, false); });
    el.olderBtn.hidden = !page.hasMore;
    el.messages.scrollTop = el.messages.scrollHeight;
    markRead();
  }).catch(function (err) {
    if (state.topic !== topic || sub.state === 'failed' || sub.state === 'ended') { return; }
    if (err.name === 'ConnectionLostError' && client) {
      client.ready().then(function () { if (state.topic === topic) { loadLatest(topic, subscribeTopic(topic, true)); } }, function () {});
      return;
    }
    setText(el.sendStatus, 'Could not load the history: ' + err.message);
  });
}

function onPres(p) {
  if (!p.src) { return; }
  var uid = String(p.src);
  if (uid === state.userId) { return; }
  if (p.what === 'on' || p.what === 'off') { state.presFrames.set(uid, (state.presFrames.get(uid) || 0) + 1); }
  if (p.what === 'on') { state.online.set(uid, true); } else if (p.what === 'off') { state.online.set(uid, false); }
  renderPresence();
  var r = state.room;
  var here = listed(uid, true);
  if (p.what === 'on' && r && r.topic === p.topic && isGroup(r.topic) && !here(r.members)) {
    refreshMembers(r.topic, here); // someone new is here
  }
}

// onInfo handles notes and changes: typing, read receipts, recalls and edits, and changes of
// groups and relations, which the page refreshes from REST.
function onInfo(i) {
  var r = state.room;
  var here = r && i.topic === r.topic;
  var from = i.from ? String(i.from) : '';
  var seq = Number(i.seq) || 0;
  switch (i.what) {
    case 'kp':
      if (here && from && from !== state.userId) { showTyping(from); }
      return;
    case 'read':
      var c = state.convs.get(i.topic);
      if (c && from && from !== state.userId) { c.peerReadSeq = Math.max(c.peerReadSeq, seq); if (here) { applyReceipts(); } }
      return;
    case 'recall':
    case 'edit':
      changeMessage(i, here, seq);
      return;
    case 'friend_requested': case 'friend_accepted': case 'friend_declined': case 'friend_removed':
    case 'blocked': case 'unblocked':
      settleFriends();
      return;
  }
  if (i.topic && isGroup(i.topic)) {
    var mine = String(i.src || '') === state.userId;
    if (i.what === 'dissolved' || mine && (i.what === 'removed' || i.what === 'left')) {
      state.convs.delete(i.topic);
      if (here) {
        r.member = false; renderRoomHead();
        setText(el.sendStatus, i.what === 'dissolved' ? 'This group was dissolved.' : 'You are no longer a member of this group.');
      }
      renderConvs();
      return;
    }
    if (here) {
      var who = String(i.src || '');
      var settled = null;
      if (who && i.what === 'joined') { settled = listed(who, true); }
      if (who && (i.what === 'left' || i.what === 'removed')) { settled = listed(who, false); }
      refreshMembers(i.topic, settled);
    }
    if (i.what === 'profile' || i.what === 'joined' || i.what === 'left' || i.what === 'removed') { setTimeout(loadConversations, 500); }
  }
}

function remember(m, topic, seq) {
  if (!m.has(topic)) { m.set(topic, new Set()); }
  m.get(topic).add(seq);
}

function marked(m, topic, seq) { return m.has(topic) && m.get(topic).has(seq); }

function changeMessage(i, here, seq) {
  if (i.what === 'recall') { remember(state.recalled, i.topic, seq); }
  var c = state.convs.get(i.topic);
  if (c && c.last && c.last.seq === seq) {
    c.last.text = i.what === 'recall' ? '(message recalled)' : contentText(i.content);
    renderConvs();
  }
  var li = here && state.room.bySeq.get(seq);
  if (!li) { return; }
  if (i.what === 'recall') {
    markRecalled(li);
    if (state.room.editing === seq) { cancelEdit(); }
  } else {
    setText(li.querySelector('.text'), contentText(i.content));
    setText(li.querySelector('.edited'), '(edited)');
    if (i.version) { li.dataset.version = String(i.version); }
  }
}

function showTyping(uid) {
  var r = state.room;
  clearTimeout(r.typing.get(uid));
  r.typing.set(uid, setTimeout(function () { r.typing.delete(uid); renderTyping(); }, TYPING_SHOWN_MS));
  renderTyping();
}

function renderTyping() {
  var r = state.room;
  var names = r ? Array.from(r.typing.keys()).map(displayName) : [];
  setText(el.typing, names.length === 0 ? '' : names.join(', ') + (names.length === 1 ? ' is' : ' are') + ' typing…');
}

// ---- the account panel -----------------------------------------------------------------------

// accountDone shows what an account request did, or why it failed (the server's words).
function accountDone(status, err) {
  setText(el.accountStatus, err ? '' : status);
  setText(el.accountError, err ? status + ': ' + describe(err) : '');
}

// closeAccount empties the panel (a logout).
function closeAccount() {
  el.accountBox.open = false;
  el.sessions.replaceChildren();
  el.oldPassword.value = ''; el.newPassword.value = ''; el.deletePassword.value = '';
  setText(el.accountStatus, ''); setText(el.accountError, '');
}

// loadSessions lists the user's signed-in sessions, each but this one with a Sign out button.
function loadSessions() {
  var session = state.token;
  return rest.sessions().then(function (data) {
    if (state.token !== session) { return; }
    var list = data.sessions || [];
    el.sessions.replaceChildren.apply(el.sessions, list.length ? list.map(sessionItem) : [node('li', 'hint', 'No session listed yet.')]);
  }).catch(function (err) { accountDone('Could not list the sessions', err); });
}

function sessionItem(x) {
  var li = node('li');
  li.dataset.session = x.session_id;
  var what = [x.device || x.user_agent || 'A session', x.ip_hint ? 'from ' + x.ip_hint : '',
    'since ' + formatTime(x.started_at)].filter(Boolean).join(' · ');
  li.appendChild(node('span', 'what', what));
  if (x.current) {
    li.appendChild(node('span', 'hint', '(this one)'));
  } else {
    li.appendChild(button('Sign out', 'quiet', function () { signOutSession(x.session_id); }, 'Sign out ' + what));
  }
  return li;
}

// signOutSession ends another session of the user: its connections close at once.
function signOutSession(id) {
  rest.endSession(id).then(function () {
    accountDone('Signed that session out.');
    var li = el.sessions.querySelector('li[data-session="' + CSS.escape(id) + '"]');
    if (li) { li.remove(); }
  }).catch(function (err) { accountDone('Could not sign the session out', err); });
}

el.accountBox.addEventListener('toggle', function () { if (el.accountBox.open && state.token) { loadSessions(); } });

el.passwordForm.addEventListener('submit', function (ev) {
  ev.preventDefault();
  var old = el.oldPassword.value;
  var next = el.newPassword.value;
  if (!old || !next) { accountDone('Enter the current and the new password', { message: 'both are required' }); return; }
  rest.changePassword(old, next).then(function () {
    el.oldPassword.value = ''; el.newPassword.value = '';
    accountDone('Password changed; your other sessions were signed out.');
    loadSessions();
  }).catch(function (err) { accountDone('Could not change the password', err); });
});

el.logoutAllBtn.addEventListener('click', function () {
  rest.logoutEverywhere().then(function () { logout('You logged out everywhere.'); })
    .catch(function (err) { accountDone('Could not log out everywhere', err); });
});

el.deleteForm.addEventListener('submit', function (ev) {
  ev.preventDefault();
  var pw = el.deletePassword.value;
  if (!pw) { accountDone('Enter your password to delete the account', { message: 'the password is required' }); return; }
  rest.deleteAccount(pw).then(function () { logout('Your account was deleted.'); })
    .catch(function (err) { accountDone('Could not delete the account', err); });
});

// ---- start ---------------------------------------------------------------------------------

if (!restoreSession()) { showLinkHint(); el.loginName.focus(); }
