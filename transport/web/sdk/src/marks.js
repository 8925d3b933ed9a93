// Read and receive marks waiting to be sent: only the highest of each is sent, once per
// connection, after the next login when the client is not connected.

/** @typedef {import('./connection.js').Connection} Connection */

/** ReadMarks keeps the marks of every topic; internal to the Client. */
export class ReadMarks {
  constructor() {
    /** @type {Map<string, {read: number, recv: number, sentRead: number, sentRecv: number}>} */
    this._topics = new Map();
  }

  /**
   * set raises topic's read or receive mark to seq; a lower seq changes nothing.
   *
   * @param {string} topic
   * @param {'read'|'recv'} what
   * @param {number} seq
   */
  set(topic, what, seq) {
    const m = this._topics.get(topic) || { read: 0, recv: 0, sentRead: 0, sentRecv: 0 };
    if (what === 'read') { m.read = Math.max(m.read, seq); } else { m.recv = Math.max(m.recv, seq); }
    this._topics.set(topic, m);
  }

  /**
   * flush sends on conn every mark higher than what was sent (a read mark moves the receive mark
   * too).
   *
   * @param {Connection} conn
   */
  flush(conn) {
    for (const [topic, m] of this._topics) {
      if (m.read > m.sentRead && conn.notify({ note: { topic, what: 'read', seq: String(m.read) } })) {
        m.sentRead = m.read;
        m.sentRecv = Math.max(m.sentRecv, m.read);
      }
      if (m.recv > m.sentRecv && conn.notify({ note: { topic, what: 'recv', seq: String(m.recv) } })) {
        m.sentRecv = m.recv;
      }
    }
  }

  /** resent makes every mark due again (a new connection: the server may not have them). */
  resent() {
    for (const m of this._topics.values()) {
      m.sentRead = 0;
      m.sentRecv = 0;
    }
  }
}
