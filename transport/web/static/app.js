// imledger demo chat, the page: logs in over REST, then chats over the WebSocket gateway
// through net.js. Message content is always rendered as text (textContent), never as HTML.
(function () {
  'use strict';

  var net = window.imledgerNet;

  var TENANT = 'demo';
  var HISTORY_PAGE = 50;
  var CATCH_UP_PAGE = 100;
  var PRESENCE_LOOKUPS = 50;
  var STORAGE_KEY = 'imledger.demo.session';

  // REST endpoints the page uses; every answer is the envelope {code, data, reason, message, ...}.
  var api = {
    register: function () { return '/v1/im/auth/register'; },
    login: function () { return '/v1/im/auth/login'; },
    groups: function () { return '/v1/im/groups'; },
    group: function (gid) { return '/v1/im/groups/' + encodeURIComponent(gid); },
    joinGroup: function (gid) { return '/v1/im/groups/' + encodeURIComponent(gid) + '/join'; },
    members: function (gid) { return '/v1/im/groups/' + encodeURIComponent(gid) + '/members'; },
    user: function (uid) { return '/v1/im/users/' + encodeURIComponent(uid); },
    presence: function (uid) { return '/v1/im/users/' + encodeURIComponent(uid) + '/presence'; }
  };

  function $(id) { return document.getElementById(id); }

  var el = {
    conn: $('conn'), whoami: $('whoami'), logout: $('logout-btn'),
    loginView: $('login-view'), loginForm: $('login-form'), loginName: $('login-name'),
    loginPassword: $('login-password'), loginError: $('login-error'),
    chatView: $('chat-view'), joinForm: $('join-form'), groupId: $('group-id'),
    createForm: $('create-form'), groupName: $('group-name'), groupError: $('group-error'),
    myGroupsBox: $('my-groups-box'), myGroups: $('my-groups'),
    room: $('room'), roomTitle: $('room-title'), older: $('older-btn'), messages: $('messages'),
    sendForm: $('send-form'), message: $('message'), sendStatus: $('send-status'), online: $('online')
  };

  // The session: who is logged in, the open group and what the page knows about it.
  var state = {
    token: '', userId: '', login: '', expiresAt: '',
    groupId: '', topic: '',
    bySeq: new Map(),     // seq -> <li> of every committed message shown
    minSeq: 0, maxSeq: 0, // lowest and highest seq shown
    outbox: new Map(),    // client_msg_id -> {text, li}: sends not yet acknowledged
    names: new Map(),     // user id -> display name
    online: new Set(), presDecided: new Set(),
    readSent: 0,
    subscribed: false     // the current connection is subscribed to topic
  };

  // ---- small helpers -------------------------------------------------------------------------

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

  // request calls the REST API, as the logged-in user when authed.
  function request(method, path, body, authed) {
    return net.request(authed ? state.token : '', method, path, body);
  }

  var describe = net.describe;

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
    var creds = { tenant: TENANT, login: login, password: password };
    var registered = action === 'register' ? request('POST', api.register(), creds, false) : Promise.resolve();
    registered
      .then(function () { return request('POST', api.login(), creds, false); })
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
    loadMyGroups();
    conn.start();
  }

  function logout(message) {
    state.token = '';
    try { sessionStorage.removeItem(STORAGE_KEY); } catch (e) { /* nothing stored */ }
    conn.stop();
    resetRoom();
    state.groupId = ''; state.topic = '';
    state.names.clear(); lookups.clear();
    el.myGroups.replaceChildren(); el.myGroupsBox.hidden = true;
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
    request('POST', api.joinGroup(gid), undefined, true)
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
    request('POST', api.groups(), { name: name }, true)
      .then(function (data) {
        var gid = String(data.group_id);
        el.groupName.value = '';
        el.groupId.value = gid;
        openGroup(gid, name);
        loadMyGroups();
      })
      .catch(function (err) { groupFailed('Could not create the group: ', err); });
  });

  function groupFailed(prefix, err) {
    if (err.status === 401) { logout('Your session ended; log in again.'); return; }
    setText(el.groupError, prefix + describe(err));
  }

  // openGroup shows group gid: subscribe, load the latest page of history, find who is online.
  function openGroup(gid, name) {
    var topic = 'grp' + gid;
    if (state.topic && state.topic !== topic && connected()) {
      wsRequest('leave', { topic: state.topic }).catch(function () { /* best effort */ });
    }
    resetRoom();
    state.groupId = gid; state.topic = topic;
    saveSession();
    setText(el.roomTitle, name || 'Group ' + gid);
    el.room.hidden = false;
    markCurrentGroup();
    state.online.add(state.userId);
    renderOnline();
    if (!name) {
      readLagging(api.group(gid), function () { return state.topic === topic; }, 0).then(function (g) {
        if (state.topic === topic && g.name) { setText(el.roomTitle, g.name); }
      }).catch(function () { /* the id is title enough */ });
    }
    loadOnline(gid, topic);
    if (connected()) { enterTopic(0); }
    el.message.focus();
  }

  function resetRoom() {
    state.bySeq.clear(); state.outbox.clear();
    state.minSeq = 0; state.maxSeq = 0; state.readSent = 0;
    state.online = new Set(); state.presDecided = new Set();
    el.messages.replaceChildren(); el.online.replaceChildren();
    el.older.hidden = true;
    setText(el.sendStatus, '');
    setText(el.groupError, '');
  }

  // loadMyGroups lists the groups the user belongs to, each a button that opens it.
  function loadMyGroups() {
    request('GET', api.groups(), undefined, true).then(function (data) {
      var ids = data.group_ids || [];
      el.myGroups.replaceChildren.apply(el.myGroups, ids.map(function (gid) {
        var li = document.createElement('li');
        var b = document.createElement('button');
        b.type = 'button'; b.className = 'link'; b.dataset.group = gid;
        setText(b, 'Group ' + gid);
        b.addEventListener('click', function () { el.groupId.value = gid; openGroup(gid); });
        li.appendChild(b);
        readLagging(api.group(gid), function () { return b.isConnected; }, 0).then(function (g) {
          if (g.name) { setText(b, g.name); }
        }).catch(function () { /* keep the id */ });
        return li;
      }));
      el.myGroupsBox.hidden = ids.length === 0;
      markCurrentGroup();
    }).catch(function () { /* the list is a convenience; the id box still works */ });
  }

  function markCurrentGroup() {
    el.myGroups.querySelectorAll('button').forEach(function (b) {
      if (b.dataset.group === state.groupId) { b.setAttribute('aria-current', 'true'); } else { b.removeAttribute('aria-current'); }
    });
  }

  // The read models trail the commands by a moment: right after a create or a join the group or
  // the new member may be unknown to the member list and to the right to subscribe (404, or 403
  // not_member). Such refusals are retried a few times.
  var MEMBER_RETRIES = 6;

  // readLagging GETs a read-model resource, asking again while it answers 403 or 404 and
  // stillWanted() holds.
  function readLagging(path, stillWanted, tries) {
    return request('GET', path, undefined, true).catch(function (err) {
      if ((err.status === 403 || err.status === 404) && tries + 1 < MEMBER_RETRIES && stillWanted()) {
        return new Promise(function (resolve) { later(tries, resolve); })
          .then(function () { return readLagging(path, stillWanted, tries + 1); });
      }
      throw err;
    });
  }

  // loadOnline asks REST which members of the group are online. pres frames that arrived in the
  // meantime win, since they are newer.
  function loadOnline(gid, topic) {
    readLagging(api.members(gid) + '?limit=' + PRESENCE_LOOKUPS, function () { return state.topic === topic; }, 0)
      .then(function (data) {
        (data.members || []).forEach(function (m) {
          var uid = String(m.user_id);
          if (uid === state.userId) { return; }
          request('GET', api.presence(uid), undefined, true).then(function (p) {
            if (state.topic !== topic || state.presDecided.has(uid)) { return; }
            if (p.online) { state.online.add(uid); renderOnline(); }
          }).catch(function () { /* presence unknown: leave it to pres frames */ });
        });
      })
      .catch(function () { /* the member list is a convenience; pres frames still come */ });
  }

  // Display names: the public profile's nickname, looked up once per user.
  var lookups = new Set(); // user ids looked up

  function learnName(uid) {
    if (uid === state.userId || lookups.has(uid)) { return; }
    lookups.add(uid);
    var session = state.token;
    readLagging(api.user(uid), function () { return state.token === session; }, 0).then(function (u) {
      if (u.nickname && state.token === session) { state.names.set(uid, u.nickname); relabel(); }
    }).catch(function () { lookups.delete(uid); /* asked again when the user shows up again */ });
  }

  function renderOnline() {
    var ids = Array.from(state.online);
    ids.forEach(learnName);
    ids.sort(function (a, b) { return displayName(a).localeCompare(displayName(b)); });
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
    learnName(from);
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
    var text = d.status === 'recalled' ? '(message recalled)'
      : d.status === 'blocked' ? '(message unavailable)' : contentText(d.content);
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
    conn.send({ note: { topic: state.topic, what: 'read', seq: String(state.maxSeq) } });
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
    var cmid = 'web-' + net.randomId();
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
        if (err.code === 401) { logout('Your session ended; log in again.'); return; }
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

  var conn = new net.Connection({
    token: function () { return state.token; },
    onReady: function () {
      state.subscribed = false;
      if (state.topic) { enterTopic(0); }
    },
    onClosed: function () { state.subscribed = false; },
    onFrame: function (f) {
      if (f.data) { onLive(f.data); } else if (f.pres) { onPres(f.pres); } else if (f.ctrl && f.ctrl.code === 401) {
        logout('Your session ended; log in again.');
      }
      // Other unanswered errors (a refused read note, say) change nothing on the page.
    },
    onStatus: function (text) { setText(el.conn, text); },
    onAuthFailed: function () { logout('Your session ended; log in again.'); }
  });

  function connected() { return conn.isReady(); }
  function wsRequest(type, body) { return conn.request(type, body); }

  // History pages and live messages share onData; history replies are data frames that arrive
  // while a get is outstanding, which is all the distinction the page needs (gaps are checked only
  // between live frames that follow each other).
  var historyInFlight = 0;
  function onLive(d) {
    d.live = historyInFlight === 0;
    onData(d);
  }

  function onPres(p) {
    if (p.topic !== state.topic || !p.src) { return; }
    var uid = String(p.src);
    state.presDecided.add(uid);
    if (p.what === 'on') { state.online.add(uid); } else if (p.what === 'off' && uid !== state.userId) { state.online.delete(uid); }
    renderOnline();
  }

  // enterTopic subscribes to the open group, sends what waits in the outbox and catches up:
  // the latest page when nothing is shown yet, else every message after the highest seq shown.
  // A refusal because the read models do not know the group or the membership yet is retried.
  function enterTopic(tries) {
    var topic = state.topic;
    wsRequest('sub', { topic: topic })
      .then(function () {
        if (topic !== state.topic) { return; }
        state.subscribed = true;
        state.outbox.forEach(function (_, cmid) { publish(cmid); });
        (state.maxSeq ? catchUp(topic) : latest(topic))
          .then(function () { recheck(topic, 0); markRead(); })
          .catch(function (err) {
            if (err.code !== 0) { setText(el.sendStatus, 'Could not load the history: ' + err.message); }
          });
      })
      .catch(function (err) {
        if (err.code === 0 || topic !== state.topic) { return; } // a new connection subscribes again
        if ((err.code === 404 || (err.code === 403 && err.reason === 'not_member')) && tries + 1 < MEMBER_RETRIES) {
          later(tries, function () { if (topic === state.topic && connected() && !state.subscribed) { enterTopic(tries + 1); } });
          return;
        }
        setText(el.groupError, 'Could not open group ' + state.groupId + ': ' + err.message);
      });
  }

  function history(body) {
    historyInFlight++;
    return wsRequest('get', body).finally(function () { historyInFlight--; });
  }

  // History comes from read models, which trail the commits by a moment, and their last_seq
  // trails with them, so a page cannot tell that a message committed just before it subscribed
  // is missing. After entering a topic the page therefore asks again a few times, with growing
  // pauses, for anything after the highest seq shown. Seqs that stay missing are holes (sends
  // that failed after drawing a seq).
  var LAG_RETRIES = 4;

  function later(tries, f) { setTimeout(f, 400 * Math.pow(2, tries)); }

  function latest(topic) {
    return history({ topic: topic, limit: HISTORY_PAGE }).then(function (c) {
      el.older.hidden = !(c.params && c.params.has_more);
      el.messages.scrollTop = el.messages.scrollHeight;
    });
  }

  // catchUp loads every message after the highest seq shown, page by page.
  function catchUp(topic) {
    return history({ topic: topic, after_seq: String(state.maxSeq), limit: CATCH_UP_PAGE }).then(function (c) {
      if (topic === state.topic && c.params && c.params.has_more && Number(c.params.count) > 0) { return catchUp(topic); }
    });
  }

  // recheck catches up again after each of LAG_RETRIES growing pauses while the topic stays
  // open on the same connection.
  function recheck(topic, tries) {
    if (tries >= LAG_RETRIES) { return; }
    var generation = conn.generation;
    later(tries, function () {
      if (topic !== state.topic || conn.generation !== generation || !state.subscribed) { return; }
      catchUp(topic).then(function () { recheck(topic, tries + 1); })
        .catch(function () { /* the next connection catches up */ });
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
