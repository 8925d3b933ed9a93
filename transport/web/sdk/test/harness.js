// The test harness: real `imledger serve` processes on free ports, each with its own PostgreSQL
// database, MySQL database names, Redis key prefix and embedded Kafka broker, using the local
// services (as the Go tests do). Nothing is mocked. IMLEDGER_BIN names the binary (scripts/test.js
// builds it once); IM_TEST_POSTGRES_URL, IM_TEST_MYSQL_DSN and IM_TEST_REDIS_ADDR move the
// services as for the Go tests.

import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

import { RestClient } from '../src/index.js';

const POSTGRES_URL = process.env.IM_TEST_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable';
const MYSQL_DSN = process.env.IM_TEST_MYSQL_DSN || 'root@tcp(127.0.0.1:3306)/';
const REDIS_ADDR = process.env.IM_TEST_REDIS_ADDR || '127.0.0.1:6379';
const SECRET = 'imledger-sdk-test-key-'.repeat(3);

/** uniqueName is prefix_<10 hex digits>, as the Go tests name what they create. */
export function uniqueName(prefix) {
  return prefix + '_' + randomBytes(5).toString('hex');
}

/** freePort returns a loopback port that was free a moment ago. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {net.AddressInfo} */ (srv.address());
      srv.close(() => resolve(port));
    });
  });
}

/** reachable resolves whether host:port accepts a TCP connection within 3 s. */
function reachable(host, port) {
  return new Promise((resolve) => {
    const s = net.connect({ host, port: Number(port) });
    const done = (ok) => { s.destroy(); resolve(ok); };
    s.setTimeout(3000, () => done(false));
    s.once('connect', () => done(true));
    s.once('error', () => done(false));
  });
}

/** checkServices fails, naming the service, when PostgreSQL, MariaDB or Redis is not there. */
export async function checkServices() {
  const pg = new URL(POSTGRES_URL);
  const my = /tcp\(([^:)]+):(\d+)\)/.exec(MYSQL_DSN) || [null, '127.0.0.1', '3306'];
  const [rh, rp] = REDIS_ADDR.split(':');
  for (const [name, host, port, start] of [
    ['PostgreSQL', pg.hostname, pg.port || '5432', 'pg_ctlcluster $(ls /etc/postgresql) main start'],
    ['MySQL/MariaDB', my[1], my[2], 'start-stop-daemon --start --background --exec /usr/sbin/mariadbd'],
    ['Redis', rh, rp, 'redis-server --daemonize yes']
  ]) {
    if (!(await reachable(host, port))) {
      throw new Error(`${name} is not reachable at ${host}:${port}; start it (e.g. ${start}) or run bash .ci/run`);
    }
  }
}

/** binary is the imledger binary the tests run. */
function binary() {
  const bin = process.env.IMLEDGER_BIN;
  if (!bin) {
    throw new Error('IMLEDGER_BIN is not set: run the tests with `npm test` (scripts/test.js builds the binary)');
  }
  return bin;
}

/**
 * Server is one `imledger serve` process; restart() kills it and starts it again on the same port
 * with the same databases, as a crash and a restart would.
 */
export class Server {
  /**
   * @param {{extra?: string, relay?: string, projections?: string, admin?: boolean}} [options] extra:
   * YAML appended to the configuration; relay: the relay section (YAML flow style); projections:
   * more keys of the projections section (flow style, e.g. "fetch_linger: 1s"); admin: give the
   * embedded broker a fixed port, so `imledger admin send` finds it
   */
  constructor(options = {}) {
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'imledger-sdk-'));
    this.database = uniqueName('ims_sdk');
    this.template = uniqueName('ims_sdk');
    this.prefix = uniqueName('imt_sdk') + ':';
    this.extra = options.extra || '';
    this.relay = options.relay || '{min_poll: 1ms, max_poll: 20ms}';
    this.projections = options.projections ? ', ' + options.projections : '';
    this.wantAdmin = !!options.admin;
    this.proc = null;
    this.logs = '';
  }

  /** start writes the configuration, starts serve and waits until /readyz answers 200. */
  async start() {
    if (!this.port) {
      await checkServices();
      this.port = await freePort();
      this.kafkaAddr = this.wantAdmin ? '127.0.0.1:' + (await freePort()) : '127.0.0.1:0';
      this.base = 'http://127.0.0.1:' + this.port;
      this.wsUrl = 'ws://127.0.0.1:' + this.port + '/v1/im/ws';
      this.config = path.join(this.dir, 'serve.yaml');
      writeFileSync(this.config, this.#yaml());
    }
    const proc = spawn(binary(), ['serve', '--config', this.config], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
    this.exited = exited;
    proc.stdout.on('data', (b) => { this.logs += b; });
    proc.stderr.on('data', (b) => { this.logs += b; });
    const deadline = Date.now() + 90000;
    for (;;) {
      const ok = await fetch(this.base + '/readyz').then((r) => r.status === 200, () => false);
      if (ok) { return; }
      const gone = await Promise.race([exited, new Promise((r) => setTimeout(() => r(null), 100))]);
      if (gone) { throw new Error('serve exited before it was ready: ' + JSON.stringify(gone) + '\n' + this.logs.slice(-4000)); }
      if (Date.now() > deadline) { throw new Error('serve not ready after 90 s\n' + this.logs.slice(-4000)); }
    }
  }

  /** kill ends the process at once (SIGKILL): nothing is flushed or closed cleanly. */
  async kill() {
    if (!this.proc) { return; }
    this.proc.kill('SIGKILL');
    await this.exited;
    this.proc = null;
  }

  /** restart kills the process and starts it again on the same port. */
  async restart() {
    await this.kill();
    await this.start();
  }

  /** stop ends the process gracefully (SIGTERM), killing it after 20 s. */
  async stop() {
    if (!this.proc) { return; }
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc && this.proc.kill('SIGKILL'), 20000);
    await this.exited;
    clearTimeout(t);
    this.proc = null;
  }

  /** cleanup stops the process and drops what it created: databases, Redis keys, files. */
  async cleanup() {
    await this.stop();
    dropAll(this.database, this.template, this.prefix);
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** rest returns a RestClient of this server acting with token. */
  rest(token = '') {
    return new RestClient({ baseUrl: this.base, token });
  }

  /**
   * listed waits until the conversation list of token's user has topic, with ok(entry) true when
   * given: the read models have caught up with what the test did.
   *
   * @param {string} what
   * @param {string} token
   * @param {string} topic
   * @param {(c: import('../src/rest.js').Conversation) => boolean} [ok]
   */
  async listed(what, token, topic, ok = () => true) {
    await waitFor(what, async () => (await this.rest(token).conversations()).conversations.some((c) => c.topic === topic && ok(c)), 15000);
  }

  /**
   * signUp registers login in the demo tenant and logs in; it resolves with the user's id and
   * token.
   */
  async signUp(login, password = 'correct horse battery') {
    const anon = this.rest();
    const creds = { tenant: 'demo', login, password };
    await anon.register(creds);
    const r = await anon.login(creds);
    return { id: r.user_id, token: r.token, sessionId: r.session_id || '', login, password };
  }

  /** issueToken runs `imledger token issue` for user with lifetime ttl (a Go duration). */
  issueToken(user, ttl) {
    const r = spawnSync(binary(), ['token', 'issue', '--config', this.config, '--tenant', 'demo', '--user', user, '--ttl', ttl],
      { encoding: 'utf8' });
    if (r.status !== 0) { throw new Error('token issue: ' + r.stderr); }
    return r.stdout.trim();
  }

  /** sql runs a query on this server's event store with psql and returns its rows, fields split by "|". */
  sql(query) {
    const pg = new URL(POSTGRES_URL);
    const r = spawnSync('psql', ['-h', pg.hostname, '-p', pg.port || '5432', '-U', decodeURIComponent(pg.username) || 'postgres',
      '-d', this.database, '-Atc', query], { encoding: 'utf8' });
    if (r.status !== 0) { throw new Error('psql: ' + (r.error ? r.error.message : r.stderr)); }
    return r.stdout.split('\n').filter(Boolean).map((line) => line.split('|'));
  }

  /** admin sends an admin command with `imledger admin send` and returns what it printed. */
  admin(type, payload) {
    const r = spawnSync(binary(), ['admin', 'send', '--config', this.config, '--type', type, '--tenant', 'demo',
      '--payload', JSON.stringify(payload), '--actor', 'sdk-test'], { encoding: 'utf8' });
    if (r.status !== 0) { throw new Error('admin send ' + type + ': ' + r.stdout + r.stderr); }
    return r.stdout;
  }

  #yaml() {
    const pg = new URL(POSTGRES_URL);
    pg.pathname = '/' + this.database;
    return `node_id: ${this.database.replace(/_/g, '-')}
shutdown_timeout: 10s
log: {level: warn, format: json}
http: {addr: "127.0.0.1:${this.port}", login_per_ip: 100000, login_per_name_ip: 100000, login_per_name: 100000, register_per_ip: 100000}
rate_limit: {send_per_user: 1000000, send_per_topic: 1000000, rest_per_user: 1000000, ws_connect_per_ip: 1000000, group_create_per_user: 1000000}
postgres: {url: "${pg.toString()}"}
mysql: {server_dsn: "${MYSQL_DSN}", database_template: "${this.template}_{tenant}"}
redis: {addr: "${REDIS_ADDR}", key_prefix: "${this.prefix}"}
kafka: {embedded: {addr: "${this.kafkaAddr}", data_dir: "${path.join(this.dir, 'kafka')}"}}
auth: {keys: [{id: t1, secret: "${SECRET}"}]}
account: {password: {memory: 1024, time: 1, threads: 1, salt_len: 16, key_len: 32}}
relay: ${this.relay}
projections: {lag_interval: 1s, close_timeout: 5s, nack_resend_sleep: 50ms, retry: {initial_interval: 10ms, max_interval: 200ms}${this.projections}}
files: {dir: "${path.join(this.dir, 'files')}"}
${this.extra}
`;
  }
}

/** dropAll drops the PostgreSQL database, the MySQL databases of template and the Redis keys of prefix. */
function dropAll(database, template, prefix) {
  const pg = new URL(POSTGRES_URL);
  spawnSync('psql', ['-h', pg.hostname, '-p', pg.port || '5432', '-U', decodeURIComponent(pg.username) || 'postgres', '-d', 'postgres',
    '-qc', `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`], { encoding: 'utf8' });
  const my = /^([^@:]*)(?::([^@]*))?@tcp\(([^:)]+):(\d+)\)/.exec(MYSQL_DSN);
  if (my) {
    const args = ['-h', my[3], '-P', my[4], '-u', my[1] || 'root', ...(my[2] ? ['-p' + my[2]] : [])];
    const list = spawnSync('mysql', [...args, '-N', '-e', `SHOW DATABASES LIKE '${template}\\_%'`], { encoding: 'utf8' });
    for (const db of (list.stdout || '').split('\n').filter(Boolean)) {
      spawnSync('mysql', [...args, '-e', 'DROP DATABASE IF EXISTS `' + db + '`']);
    }
  }
  const [host, port] = REDIS_ADDR.split(':');
  const keys = spawnSync('redis-cli', ['-h', host, '-p', port, '--scan', '--pattern', prefix + '*'], { encoding: 'utf8' });
  const all = (keys.stdout || '').split('\n').filter(Boolean);
  for (let i = 0; i < all.length; i += 500) {
    spawnSync('redis-cli', ['-h', host, '-p', port, 'DEL', ...all.slice(i, i + 500)]);
  }
}

/**
 * startServer starts a Server and registers its cleanup with the test context's after hook.
 *
 * @param {{after: (fn: () => unknown) => void}} t node:test's test context (or the module's after)
 */
export async function startServer(t, options) {
  const s = new Server(options);
  t.after(() => s.cleanup());
  await s.start();
  return s;
}

/** waitFor polls cond every 20 ms until it is true, or fails after ms with what. */
export async function waitFor(what, cond, ms = 30000) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await cond()) { return; }
    if (Date.now() > deadline) { throw new Error('timed out waiting for ' + what); }
    await new Promise((r) => setTimeout(r, 20));
  }
}
