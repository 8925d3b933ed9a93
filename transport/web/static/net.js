// imledger demo chat, the network side: request() calls the REST API, and a Connection keeps one
// session with the WebSocket gateway (/v1/im/ws) open: hi, login, pings, and reconnecting with
// exponential backoff and jitter. It knows nothing of the page; app.js does.
(function () {
  'use strict';

  var MAX_BACKOFF_MS = 15000;

  // randomId returns 24 random hex digits (crypto.getRandomValues works on plain HTTP too).
  function randomId() {
    var b = new Uint8Array(12);
    crypto.getRandomValues(b);
    return Array.prototype.map.call(b, function (x) { return ('0' + x.toString(16)).slice(-2); }).join('');
  }

  // request calls the REST API with token ('' for none) and resolves with the envelope's data.
  // Every write carries a fresh Idempotency-Key. A failure rejects with an Error carrying the
  // HTTP status and the envelope's reason and details.
  function request(token, method, path, body) {
    var headers = { 'Accept': 'application/json' };
    if (body !== undefined) { headers['Content-Type'] = 'application/json'; }
    if (token) {
      headers['Authorization'] = 'Bearer ' + token;
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

  // describe is an error's message with its detail reason, for people.
  function describe(err) {
    var d = err.details && (err.details.reason || err.details.field);
    return err.message + (d ? ' (' + d + ')' : '');
  }

  function lost(text) { var e = new Error(text); e.code = 0; return e; }

  // Connection is the gateway session. opts:
  //   token()        the token to log in with ('' stops reconnecting)
  //   onReady()      logged in, on every (re)connection
  //   onClosed()     the connection ended; requests in flight were rejected with code 0
  //   onFrame(f)     every server frame except the ctrl answers of request()
  //   onStatus(s)    a line for people about the connection
  //   onAuthFailed() the token was refused at login
  function Connection(opts) {
    this.opts = opts;
    this.ws = null;
    this.ready = false;
    this.generation = 0; // counts connections, so callers can tell a new one from the old
    this.nextId = 0;
    this.waiting = new Map(); // frame id -> {resolve, reject}
    this.attempt = 0;
    this.reconnectTimer = 0;
    this.pingTimer = 0;
    var self = this;
    window.addEventListener('online', function () {
      if (!self.ws && self.opts.token()) { self.attempt = 0; self.start(); }
    });
  }

  // isReady reports whether the session is open and logged in.
  Connection.prototype.isReady = function () {
    return this.ready && this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  };

  // send sends a frame that expects no answer (a note); it is dropped while disconnected.
  Connection.prototype.send = function (frame) {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) { this.ws.send(JSON.stringify(frame)); }
  };

  // request sends a frame of type with a fresh id and resolves with the ctrl answering it
  // (code < 300), or rejects with an Error carrying the ctrl's code and reason (code 0 when the
  // connection is gone).
  Connection.prototype.request = function (type, body) {
    var self = this;
    return new Promise(function (resolve, reject) {
      if (!self.ws || self.ws.readyState !== WebSocket.OPEN) { reject(lost('not connected')); return; }
      body.id = String(++self.nextId);
      self.waiting.set(body.id, { resolve: resolve, reject: reject });
      var frame = {};
      frame[type] = body;
      self.ws.send(JSON.stringify(frame));
    });
  };

  // start connects unless connected or connecting.
  Connection.prototype.start = function () {
    if (this.ws || !this.opts.token()) { return; }
    clearTimeout(this.reconnectTimer);
    this.opts.onStatus(this.attempt ? 'Reconnecting…' : 'Connecting…');
    var scheme = location.protocol === 'https:' ? 'wss://' : 'ws://';
    var sock = new WebSocket(scheme + location.host + '/v1/im/ws');
    var self = this;
    this.ws = sock;
    this.ready = false;
    this.generation++;
    sock.addEventListener('open', function () { self.greet(sock); });
    sock.addEventListener('message', function (ev) { self.receive(ev.data); });
    sock.addEventListener('close', function () { self.closed(sock); });
  };

  // greet says hi, starts pinging at half the server's idle timeout and logs in.
  Connection.prototype.greet = function (sock) {
    var self = this;
    this.request('hi', { ver: '1', ua: 'imledger-web/1 ' + navigator.userAgent.slice(0, 200) })
      .then(function (c) {
        var idle = Number(c.params && c.params.idle_timeout_s) || 60;
        clearInterval(self.pingTimer);
        self.pingTimer = setInterval(function () {
          self.request('ping', {}).catch(function () { /* a dead connection closes by itself */ });
        }, Math.max(5, idle / 2 - 2) * 1000);
        return self.request('login', { token: self.opts.token() });
      })
      .then(function () {
        self.attempt = 0;
        self.ready = true;
        self.opts.onStatus('Connected');
        self.opts.onReady();
      })
      .catch(function (err) {
        if (err.code === 401) { self.opts.onAuthFailed(); return; }
        sock.close();
      });
  };

  Connection.prototype.receive = function (text) {
    var f;
    try { f = JSON.parse(text); } catch (e) { return; }
    var c = f.ctrl;
    var p = c && c.id ? this.waiting.get(c.id) : null;
    if (!p) { this.opts.onFrame(f); return; }
    this.waiting.delete(c.id);
    if (c.code < 300) { p.resolve(c); return; }
    var e = new Error(c.text || ('error ' + c.code));
    e.code = c.code; e.reason = c.reason || '';
    p.reject(e);
  };

  // closed cleans up after sock and schedules the next attempt: 0.5 s doubling up to 15 s, each
  // pause drawn between half and all of that, so clients of a restarted node spread out.
  Connection.prototype.closed = function (sock) {
    if (this.ws !== sock) { return; }
    this.ws = null;
    this.ready = false;
    clearInterval(this.pingTimer);
    this.failWaiting();
    this.opts.onClosed();
    if (!this.opts.token()) { return; }
    var delay = Math.min(MAX_BACKOFF_MS, 500 * Math.pow(2, this.attempt)) * (0.5 + Math.random() / 2);
    this.attempt++;
    this.opts.onStatus('Disconnected; reconnecting in ' + Math.ceil(delay / 1000) + ' s');
    this.reconnectTimer = setTimeout(this.start.bind(this), delay);
  };

  // stop closes the connection for good (until start).
  Connection.prototype.stop = function () {
    clearTimeout(this.reconnectTimer);
    clearInterval(this.pingTimer);
    var sock = this.ws;
    this.ws = null;
    this.ready = false;
    this.attempt = 0;
    this.failWaiting();
    if (sock) { sock.close(1000); }
  };

  Connection.prototype.failWaiting = function () {
    var w = this.waiting;
    this.waiting = new Map();
    w.forEach(function (p) { p.reject(lost('connection lost')); });
  };

  window.imledgerNet = { randomId: randomId, request: request, describe: describe, Connection: Connection };
})();
