// imledger demo chat. Logs in over REST, then chats over the WebSocket gateway (/v1/im/ws).
// Message content is always rendered as text (textContent), never as HTML.
(function () {
  'use strict';

  var TENANT = 'demo';
  var HISTORY_PAGE = 50;
  var CATCH_UP_PAGE = 100;
  var MAX_BACKOFF_MS = 15000;
  var PRESENCE_LOOKUPS = 50;
  var STORAGE_KEY = 'imledger.demo.session';

  // REST endpoints the page uses; every answer is the envelope {code, data, reason, message, ...}.
  var api = {
    register: function () { return '/v1/im/auth/register'; },
    login: function () { return '/v1/im/auth/login'; },
    createGroup: function () { return '/v1/im/groups'; },
    joinGroup: function (gid) { return '/v1/im/groups/' + encodeURIComponent(gid) + '/join'; },
    members: function (gid) { return '/v1/im/groups/' + encodeURIComponent(gid) + '/members'; },
    presence: function (uid) { return '/v1/im/users/' + encodeURIComponent(uid) + '/presence'; }
  };

  function $(id) { return document.getElementById(id); }

  var el = {
    conn: $('conn'), whoami: $('whoami'), logout: $('logout-btn'),
    loginView: $('login-view'), loginForm: $('login-form'), loginName: $('login-name'),
    loginPassword: $('login-password'), loginError: $('login-error'),
    chatView: $('chat-view'), joinForm: $('join-form'), groupId: $('group-id'),
    createForm: $('create-form'), groupName: $('group-name'), groupError: $('group-error'),
    room: $('room'), roomTitle: $('room-title'), older: $('older-btn'), messages: $('messages'),
    sendForm: $('send-form'), message: $('message'), sendStatus: $('send-status'), online: $('online')
  };

  // The session: who is logged in, the open group and what the page knows about it.
  var state = {
    token: '', userId: '', login: '', expiresAt: '',
    groupId: '', topic: '',
    bySeq: new Map(),     // seq -> <li> of every committed message shown
    minSeq: 0, maxSeq: 0, // lowest and highest seq shown
    hasOlder: false,
    outbox: new Map(),    // client_msg_id -> {text, li}: sends not yet acknowledged
    names: new Map(),     // user id -> display name
    online: new Set(), presDecided: new Set(),
    readSent: 0,
    loggedIn: false,      // the WebSocket session is logged in
    subscribed: false     // ... and subscribed to topic
  };

  // ---- small helpers -------------------------------------------------------------------------

  function randomId() {
    var b = new Uint8Array(12);
    crypto.getRandomValues(b);
    return Array.prototype.map.call(b, function (x) { return ('0' + x.toString(16)).slice(-2); }).join('');
  }

  function setText(node, text) { node.textContent = text == null ? '' : String(text); }

  function displayName(uid) {
    if (uid === state.userId) { return state.login + ' (you)'; }
    return state.names.get(uid) || 'user ' + uid;
  }

  function contentText(content) {
    if (typeof content === 'string') { return content; }
    if (content && typeof content === 'object' && typeof content.text === 'string') { return content.text; }
    return JSON.stringify(content);
  }

  function formatTime(ts) {
    var d = new Date(ts);
    return isNaN(d.getTime()) ? '' : d.toLocaleTimeString();
  }

  // ---- REST ----------------------------------------------------------------------------------

  // request calls the REST API and returns the envelope's data; a failure throws an Error with
  // the envelope's reason, message and details.
  function request(method, path, body, authed) {
    var headers = { 'Accept': 'application/json' };
    if (body !== undefined) { headers['Content-Type'] = 'application/json'; }
    if (authed) {
      headers['Authorization'] = 'Bearer ' + state.token;
      if (method !== 'GET') { headers['Idempotency-Key'] = randomId(); }
    }
    return fetch(path, {
      method: method, headers: headers, credentials: 'omit', cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body)
    }).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (env) {
        if (!res.ok) {
          var err = new Error(env.message || ('HTTP ' + res.status));
          err.status = res.status; err.reason = env.reason || ''; err.details = env.details || {};
          throw err;
        }
        return env.data || {};
      });
    });
  }

  function describe(err) {
    var d = err.details && (err.details.reason || err.details.field);
    return err.message + (d ? ' (' + d + ')' : '');
  }

  // ---- log in --------------------------------------------------------------------------------

  function saveSession() {
    try {
      sessionStorage.setItem(STORAGE_KEY, JSON.stringify({
        token: state.token, userId: state.userId, login: state.login,
        expiresAt: state.expiresAt, groupId: state.groupId
      }));
    } catch (e) { /* storage may be disabled; the session then ends with the page */ }
  }

  function restoreSession() {
    var s;
    try { s = JSON.parse(sessionStorage.getItem(STORAGE_KEY) || 'null'); } catch (e) { s = null; }
    if (!s || !s.token || (s.expiresAt && new Date(s.expiresAt).getTime() <= Date.now())) { return false; }
    state.token = s.token; state.userId = String(s.userId); state.login = s.login; state.expiresAt = s.expiresAt;
    enterChat();
    if (s.groupId) { openGroup(String(s.groupId)); }
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
    request('POST', action === 'register' ? api.register() : api.login(),
      { tenant_id: TENANT, login: login, password: password }, false)
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

  function enterChat() {
    setText(el.whoami, 'Logged in as ' + state.login);
    el.whoami.hidden = false; el.logout.hidden = false;
    el.loginView.hidden = true; el.chatView.hidden = false;
    el.groupId.focus();
    connect();
  }

  function logout(message) {
    state.token = '';
    try { sessionStorage.removeItem(STORAGE_KEY); } catch (e) { /* nothing stored */ }
    disconnect();
    resetRoom();
    state.groupId = ''; state.topic = '';
    el.room.hidden = true; el.chatView.hidden = true; el.loginView.hidden = false;
    el.whoami.hidden = true; el.logout.hidden = true;
    setText(el.conn, 'Not connected');
    setText(el.loginError, message || '');
    el.loginName.focus();
  }

  el.logout.addEventListener('click', function () { logout(''); });

  // ---- groups --------------------------------------------------------------------------------

  el.joinForm.addEventListener('submit', function (ev) {
    ev.preventDefault();
    var gid = el.groupId.value.trim().replace(/^grp/, '');
    setText(el.groupError, '');
    if (!/^[1-9][0-9]{0,18}$/.test(gid)) { setText(el.groupError, 'A group id is a positive number.'); el.groupId.focus(); return; }
    request('POST', api.joinGroup(gid), {}, true)
      .catch(function (err) {
        if (err.details && err.details.reason === 'already_member') { return {}; }
        throw err;
      })
      .then(function () { openGroup(gid); })
      .catch(function (err) { groupFailed('Could not join group ' + gid + ': ', err); });
  });

  el.createForm.addEventListener('submit', function (ev) {
    ev.preventDefault();
    var name = el.groupName.value.trim();
    setText(el.groupError, '');
    if (!name) { setText(el.groupError, 'Name the new group.'); el.groupName.focus(); return; }
    request('POST', api.createGroup(), { name: name }, true)
      .then(function (data) {
        var gid = String(data.group_id || data.id || '');
        el.groupName.value = '';
        el.groupId.value = gid;
        state.names.set(state.userId, state.login);
        openGroup(gid);
      })
      .catch(function (err) { groupFailed('Could not create the group: ', err); });
  });

  function groupFailed(prefix, err) {
    if (err.status === 401) { logout('Your session ended; log in again.'); return; }
    setText(el.groupError, prefix + describe(err));
  }

  // openGroup shows group gid: subscribe, load the latest page of history, find who is online.
  function openGroup(gid) {
    var topic = 'grp' + gid;
    if (state.topic && state.topic !== topic && connected()) {
      wsRequest('leave', { topic: state.topic }).catch(function () { /* best effort */ });
    }
    resetRoom();
    state.groupId = gid; state.topic = topic;
    saveSession();
    setText(el.roomTitle, 'Group ' + gid);
    el.room.hidden = false;
    state.online.add(state.userId);
    renderOnline();
    loadOnline(gid, topic);
    if (connected()) { enterTopic(); }
    el.message.focus();
  }

  function resetRoom() {
    state.bySeq.clear(); state.outbox.clear();
    state.minSeq = 0; state.maxSeq = 0; state.hasOlder = false; state.readSent = 0;
    state.online = new Set(); state.presDecided = new Set();
    el.messages.replaceChildren(); el.online.replaceChildren();
    el.older.hidden = true;
    setText(el.sendStatus, '');
  }

  // loadOnline asks REST who of the group's members is online; pres frames that arrived in the
  // meantime win, since they are newer.
  function loadOnline(gid, topic) {
    request('GET', api.members(gid) + '?limit=' + PRESENCE_LOOKUPS, undefined, true)
      .then(function (data) {
        var members = data.members || data.items || [];
        members.slice(0, PRESENCE_LOOKUPS).forEach(function (m) {
          var uid = String(m.user_id || m.user || m.id || '');
          if (!uid) { return; }
          var name = m.nickname || m.login || '';
          if (name && uid !== state.userId) { state.names.set(uid, name); }
          if (uid === state.userId) { return; }
          request('GET', api.presence(uid), undefined, true).then(function (p) {
            if (state.topic !== topic || state.presDecided.has(uid)) { return; }
            if (p.online === true || p.status === 'online') { state.online.add(uid); renderOnline(); }
          }).catch(function () { /* presence unknown: leave it to pres frames */ });
        });
        relabel();
      })
      .catch(function () { /* the member list is optional; pres frames still work */ });
  }

  function renderOnline() {
    var ids = Array.from(state.online).sort(function (a, b) { return displayName(a).localeCompare(displayName(b)); });
    el.online.replaceChildren.apply(el.online, ids.map(function (uid) {
      var li = document.createElement('li');
      li.dataset.user = uid;
      setText(li, displayName(uid));
      return li;
    }));
  }

  function relabel() {
    el.messages.querySelectorAll('li[data-from]').forEach(function (li) {
      setText(li.querySelector('.from'), displayName(li.dataset.from));
    });
    renderOnline();
  }

  // ---- messages ------------------------------------------------------------------------------

  function messageItem(from, text) {
    var li = document.createElement('li');
    li.dataset.from = from;
    if (from === state.userId) { li.classList.add('mine'); }
    var who = document.createElement('span'); who.className = 'from'; setText(who, displayName(from));
    var body = document.createElement('span'); body.className = 'text'; setText(body, text);
    var meta = document.createElement('span'); meta.className = 'meta';
    var seq = document.createElement('span'); seq.className = 'seq';
    var time = document.createElement('time'); time.className = 'ts';
    var st = document.createElement('span'); st.className = 'state';
    meta.append(seq, time, st);
    li.append(who, body, meta);
    return li;
  }

  function setSeq(li, seq) {
    li.dataset.seq = String(seq);
    setText(li.querySelector('.seq'), '#' + seq);
  }

  function setTime(li, ts) {
    var t = li.querySelector('.ts');
    if (ts) { t.dateTime = ts; setText(t, formatTime(ts)); }
  }

  // place puts a committed message at its seq's position: before the first shown message with a
  // higher seq, else before the first message still being sent, else at the end.
  function place(li, seq) {
    var stick = nearBottom();
    var next = null;
    var items = el.messages.children;
    for (var i = 0; i < items.length; i++) {
      var s = items[i].dataset.seq;
      if (s === undefined || Number(s) > seq) { next = items[i]; break; }
    }
    el.messages.insertBefore(li, next);
    state.bySeq.set(seq, li);
    if (!state.minSeq || seq < state.minSeq) { state.minSeq = seq; }
    if (seq > state.maxSeq) { state.maxSeq = seq; }
    if (stick) { el.messages.scrollTop = el.messages.scrollHeight; }
  }

  function nearBottom() {
    return el.messages.scrollHeight - el.messages.scrollTop - el.messages.clientHeight < 40;
  }

  // onData shows a data frame once: a seq already shown only updates its item (a recall shown
  // after history, say), so live frames, history pages and acks never duplicate a message.
  function onData(d) {
    if (d.topic !== state.topic) { return; }
    var seq = Number(d.seq);
    if (!(seq > 0)) { return; }
    var from = String(d.from);
    var text = d.status === 'recalled' ? '(message recalled)' : contentText(d.content);
    var li = state.bySeq.get(seq);
    if (li) {
      setText(li.querySelector('.text'), text);
      setTime(li, d.ts);
      return;
    }
    var gapFrom = state.maxSeq;
    li = messageItem(from, text);
    setSeq(li, seq);
    setTime(li, d.ts);
    place(li, seq);
    if (d.live && gapFrom > 0 && seq > gapFrom + 1) {
      fillGap(state.topic, gapFrom, seq, 0); // messages between were missed, or are holes
    }
    markRead();
  }

  function markRead() {
    if (document.visibilityState !== 'visible' || state.maxSeq <= state.readSent || !connected()) { return; }
    state.readSent = state.maxSeq;
    sendFrame({ note: { topic: state.topic, what: 'read', seq: String(state.maxSeq) } });
  }
  document.addEventListener('visibilitychange', markRead);

  el.older.addEventListener('click', function () {
    if (!state.minSeq) { return; }
    el.older.disabled = true;
    var top = el.messages.firstElementChild;
    history({ topic: state.topic, before_seq: String(state.minSeq), limit: HISTORY_PAGE })
      .then(function (c) {
        el.older.hidden = !(c.params && c.params.has_more);
        if (top) { top.scrollIntoView(); }
      })
      .catch(function (err) { setText(el.sendStatus, 'Could not load older messages: ' + err.message); })
      .finally(function () { el.older.disabled = false; });
  });

  // ---- sending -------------------------------------------------------------------------------

  el.message.addEventListener('keydown', function (ev) {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      el.sendForm.requestSubmit();
    }
  });

  el.sendForm.addEventListener('submit', function (ev) {
    ev.preventDefault();
    var text = el.message.value;
    if (!text.trim() || !state.topic) { return; }
    el.message.value = '';
    var cmid = 'web-' + randomId();
    var li = messageItem(state.userId, text);
    li.classList.add('pending');
    li.dataset.cmid = cmid;
    setText(li.querySelector('.state'), 'sending…');
    el.messages.appendChild(li);
    el.messages.scrollTop = el.messages.scrollHeight;
    state.outbox.set(cmid, { text: text, li: li, topic: state.topic });
    publish(cmid);
  });

  // publish sends an outbox entry. A lost connection or a retryable error keeps it in the
  // outbox; it is sent again, with the same client_msg_id, after the next subscribe, so the
  // server stores it once whatever happened to the first attempt.
  function publish(cmid) {
    var m = state.outbox.get(cmid);
    if (!m || !connected() || !state.subscribed) { return; }
    wsRequest('pub', { topic: m.topic, client_msg_id: cmid, msg_type: 'text', content: m.text })
      .then(function (c) { acked(cmid, c.params || {}); })
      .catch(function (err) {
        if (err.code === 0 || err.code >= 500 || err.code === 408 || err.code === 409 || err.code === 429) {
          setText(m.li.querySelector('.state'), 'waiting to resend…');
          return;
        }
        state.outbox.delete(cmid);
        m.li.classList.add('failed');
        setText(m.li.querySelector('.state'), 'not sent: ' + err.message);
        setText(el.sendStatus, 'Message not sent: ' + err.message);
      });
  }

  function acked(cmid, params) {
    var m = state.outbox.get(cmid);
    if (!m) { return; }
    state.outbox.delete(cmid);
    if (m.topic !== state.topic) { return; }
    var seq = Number(params.seq);
    var li = m.li;
    li.classList.remove('pending');
    setText(li.querySelector('.state'), params.duplicate ? 'sent (again)' : 'sent');
    setText(el.sendStatus, 'Sent as #' + seq + (params.duplicate ? ' (already stored)' : ''));
    var shown = state.bySeq.get(seq);
    if (shown) {
      // The data frame came first: keep that item and mark it as acknowledged.
      li.remove();
      setText(shown.querySelector('.state'), 'sent');
      return;
    }
    setSeq(li, seq);
    setTime(li, params.ts);
    place(li, seq);
  }

  // ---- WebSocket -----------------------------------------------------------------------------

  var ws = null;
  var nextFrameId = 0;
  var waiting = new Map(); // frame id -> {resolve, reject}
  var attempt = 0;
  var reconnectTimer = 0;
  var pingTimer = 0;

  function connected() { return ws !== null && ws.readyState === WebSocket.OPEN && state.loggedIn; }

  function sendFrame(frame) {
    if (ws && ws.readyState === WebSocket.OPEN) { ws.send(JSON.stringify(frame)); }
  }

  // wsRequest sends a frame with a fresh id and resolves with the ctrl answering it (code < 300),
  // or rejects with an Error carrying the ctrl's code (0 when the connection is gone).
  function wsRequest(type, body) {
    return new Promise(function (resolve, reject) {
      if (!ws || ws.readyState !== WebSocket.OPEN) {
        var e = new Error('not connected'); e.code = 0; reject(e); return;
      }
      var id = String(++nextFrameId);
      body.id = id;
      waiting.set(id, { resolve: resolve, reject: reject });
      var frame = {}; frame[type] = body;
      ws.send(JSON.stringify(frame));
    });
  }

  function connect() {
    if (ws || !state.token) { return; }
    clearTimeout(reconnectTimer);
    setText(el.conn, attempt ? 'Reconnecting…' : 'Connecting…');
    var scheme = location.protocol === 'https:' ? 'wss://' : 'ws://';
    var sock = new WebSocket(scheme + location.host + '/v1/im/ws');
    ws = sock;
    state.loggedIn = false; state.subscribed = false;
    sock.addEventListener('open', function () {
      wsRequest('hi', { ver: '1', ua: 'imledger-web/1 ' + navigator.userAgent.slice(0, 200) })
        .then(function (c) {
          var idle = Number(c.params && c.params.idle_timeout_s) || 60;
          clearInterval(pingTimer);
          pingTimer = setInterval(function () { wsRequest('ping', {}).catch(function () {}); }, Math.max(5, idle / 2 - 2) * 1000);
          return wsRequest('login', { token: state.token });
        })
        .then(function () {
          attempt = 0;
          state.loggedIn = true;
          setText(el.conn, 'Connected');
          if (state.topic) { enterTopic(); }
        })
        .catch(function (err) {
          if (err.code === 401) { logout('Your session ended; log in again.'); return; }
          sock.close();
        });
    });
    sock.addEventListener('message', function (ev) {
      var f;
      try { f = JSON.parse(ev.data); } catch (e) { return; }
      if (f.ctrl) { onCtrl(f.ctrl); } else if (f.data) { onLive(f.data); } else if (f.pres) { onPres(f.pres); }
    });
    sock.addEventListener('close', function () {
      if (ws !== sock) { return; }
      ws = null;
      state.loggedIn = false; state.subscribed = false;
      clearInterval(pingTimer);
      failWaiting();
      if (!state.token) { return; }
      var delay = Math.min(MAX_BACKOFF_MS, 500 * Math.pow(2, attempt)) * (0.5 + Math.random() / 2);
      attempt++;
      setText(el.conn, 'Disconnected; reconnecting in ' + Math.ceil(delay / 1000) + ' s');
      reconnectTimer = setTimeout(connect, delay);
    });
  }

  function disconnect() {
    clearTimeout(reconnectTimer);
    clearInterval(pingTimer);
    var sock = ws;
    ws = null;
    state.loggedIn = false; state.subscribed = false;
    failWaiting();
    attempt = 0;
    if (sock) { sock.close(1000); }
  }

  function failWaiting() {
    var w = waiting;
    waiting = new Map();
    w.forEach(function (p) { var e = new Error('connection lost'); e.code = 0; p.reject(e); });
  }

  window.addEventListener('online', function () {
    if (!ws && state.token) { attempt = 0; connect(); }
  });

  // History pages and live messages share onData; history replies are data frames that arrive
  // while a get is outstanding, which is all the distinction the page needs (gaps are checked only
  // between live frames that follow each other).
  var historyInFlight = 0;
  function onLive(d) {
    d.live = historyInFlight === 0;
    onData(d);
  }

  function onCtrl(c) {
    var p = c.id ? waiting.get(c.id) : null;
    if (p) {
      waiting.delete(c.id);
      if (c.code < 300) { p.resolve(c); return; }
      var e = new Error(c.text || ('error ' + c.code));
      e.code = c.code; e.reason = c.reason || '';
      p.reject(e);
      return;
    }
    if (c.code === 401) { logout('Your session ended; log in again.'); }
    // Other unanswered errors (a refused read note, say) change nothing on the page.
  }

  function onPres(p) {
    if (p.topic !== state.topic || !p.src) { return; }
    var uid = String(p.src);
    state.presDecided.add(uid);
    if (p.what === 'on') { state.online.add(uid); } else if (p.what === 'off' && uid !== state.userId) { state.online.delete(uid); }
    renderOnline();
  }

  // enterTopic subscribes to the open group and catches up: the latest page when nothing is
  // shown yet, else every message after the highest seq shown. Then unsent messages go out.
  function enterTopic() {
    var topic = state.topic;
    wsRequest('sub', { topic: topic })
      .then(function () {
        if (topic !== state.topic) { return; }
        state.subscribed = true;
        if (!state.maxSeq) { return latest(topic); }
        return catchUp(topic).then(function (last) { watchLag(topic, last, 0); });
      })
      .then(function () {
        if (topic !== state.topic) { return; }
        state.outbox.forEach(function (_, cmid) { publish(cmid); });
        markRead();
      })
      .catch(function (err) {
        if (err.code === 0) { return; } // the connection dropped; the next one subscribes again
        setText(el.groupError, 'Could not open group ' + state.groupId + ': ' + err.message);
      });
  }

  function history(body) {
    historyInFlight++;
    return wsRequest('get', body).finally(function () { historyInFlight--; });
  }

  // History comes from read models, which may trail the newest seqs by a moment. A page whose
  // last_seq is beyond what it holds is asked for again a few times, with growing pauses; seqs
  // that stay missing are holes (sends that failed after drawing a seq).
  var LAG_RETRIES = 4;

  function later(tries, f) { setTimeout(f, 400 * Math.pow(2, tries)); }

  function latest(topic) {
    return history({ topic: topic, limit: HISTORY_PAGE }).then(function (c) {
      el.older.hidden = !(c.params && c.params.has_more);
      el.messages.scrollTop = el.messages.scrollHeight;
      watchLag(topic, Number(c.params && c.params.last_seq) || 0, 0);
    });
  }

  // catchUp loads every message after the highest seq shown, page by page, and resolves with
  // the topic's last seq.
  function catchUp(topic) {
    return history({ topic: topic, after_seq: String(state.maxSeq), limit: CATCH_UP_PAGE }).then(function (c) {
      if (topic !== state.topic || !c.params) { return 0; }
      if (c.params.has_more && Number(c.params.count) > 0) { return catchUp(topic); }
      return Number(c.params.last_seq) || 0;
    });
  }

  // watchLag catches up again while the topic's last seq is beyond the highest seq shown.
  function watchLag(topic, lastSeq, tries) {
    if (lastSeq <= state.maxSeq || tries >= LAG_RETRIES) { return; }
    later(tries, function () {
      if (topic !== state.topic || !state.subscribed) { return; }
      catchUp(topic).then(function (last) { watchLag(topic, last, tries + 1); })
        .catch(function () { /* the next reconnect catches up */ });
    });
  }

  // fillGap asks for the messages between two seqs shown, again while none of them turns up.
  function fillGap(topic, after, before, tries) {
    history({ topic: topic, after_seq: String(after), before_seq: String(before), limit: CATCH_UP_PAGE })
      .then(function () {
        var found = Array.from(state.bySeq.keys()).some(function (k) { return k > after && k < before; });
        if (!found && topic === state.topic && tries + 1 < LAG_RETRIES) {
          later(tries, function () { fillGap(topic, after, before, tries + 1); });
        }
      })
      .catch(function () { /* the next reconnect catches up */ });
  }

  // ---- start ---------------------------------------------------------------------------------

  if (!restoreSession()) { el.loginName.focus(); }
})();
