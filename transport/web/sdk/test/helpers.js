// Helpers of the tests against a real server: clients that record what they emit.

import { Client } from '../src/index.js';

/**
 * Recorder is a Client and everything it emitted, by event.
 */
export class Recorder {
  /**
   * @param {string} url
   * @param {string | (() => string)} token
   * @param {import('../src/client.js').ClientOptions extends infer O ? Partial<O> : never} [options]
   */
  constructor(url, token, options = {}) {
    this.client = new Client({ url, token, backoff: { initialMs: 100, maxMs: 1000 }, ...options });
    /** @type {Record<string, any[]>} */
    this.events = {};
    for (const type of ['state', 'ready', 'message', 'update', 'presence', 'typing', 'receipt', 'change', 'notice', 'unsubscribed', 'outbox', 'error',
      'item', 'chat', 'invitation', 'joinRequest', 'membership', 'friend', 'block', 'read', 'account', 'session_revoked',
      'conversation', 'conversations', 'resync']) {
      this.events[type] = [];
      this.client.on(/** @type {any} */ (type), (e) => this.events[type].push(e));
    }
  }

  /** messages of topic, in the order they were emitted. */
  messages(topic) {
    return this.events.message.filter((m) => m.topic === topic);
  }

  /** updates of topic, in the order they were emitted. */
  updates(topic) {
    return this.events.update.filter((u) => u.topic === topic);
  }

  /** texts of topic's messages (content.text or the content itself). */
  texts(topic) {
    return this.messages(topic).map((m) => (m.content && typeof m.content === 'object' ? m.content.text : m.content));
  }

  /** connect connects and waits until logged in. */
  async connect() {
    this.client.connect();
    await this.client.ready();
    return this;
  }
}

/** sleep resolves after ms. */
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Proxy forwards TCP connections to a server. freeze() makes the connections it holds stop
 * forwarding in both directions without closing anything: a network that silently drops packets.
 * Connections made after it pass as before.
 */
export class Proxy {
  /** @param {number} target the server's port */
  constructor(target) {
    this.target = target;
    /** @type {{client: import('node:net').Socket, upstream: import('node:net').Socket}[]} */
    this.pairs = [];
  }

  /** listen starts the proxy and resolves with its port. */
  async listen() {
    const net = await import('node:net');
    this.server = net.createServer((client) => {
      const upstream = net.connect({ host: '127.0.0.1', port: this.target });
      client.pipe(upstream);
      upstream.pipe(client);
      const drop = () => { client.destroy(); upstream.destroy(); };
      client.on('error', drop);
      upstream.on('error', drop);
      client.on('close', drop);
      upstream.on('close', drop);
      this.pairs.push({ client, upstream });
    });
    await new Promise((resolve) => this.server?.listen(0, '127.0.0.1', () => resolve(undefined)));
    this.port = /** @type {import('node:net').AddressInfo} */ (this.server.address()).port;
    return this.port;
  }

  /** freeze stops every connection held now from forwarding anything. */
  freeze() {
    for (const { client, upstream } of this.pairs.splice(0)) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
      this.frozen = (this.frozen || []).concat([client, upstream]);
    }
  }

  /** close ends the proxy and every connection. */
  close() {
    for (const s of [...(this.frozen || []), ...this.pairs.flatMap((p) => [p.client, p.upstream])]) { s.destroy(); }
    this.server?.close();
  }
}
