// npm test: builds the imledger binary once (unless IMLEDGER_BIN names one), then runs the unit
// tests and the tests against a real `imledger serve` with node's test runner. Node 20 needs
// --experimental-websocket for the WebSocket class the SDK uses outside browsers.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const sdk = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const root = path.resolve(sdk, '../../..');
const env = { ...process.env };
let built = '';
if (!env.IMLEDGER_BIN) {
  built = mkdtempSync(path.join(os.tmpdir(), 'imledger-sdk-bin-'));
  env.IMLEDGER_BIN = path.join(built, 'imledger');
  process.stderr.write('building ' + env.IMLEDGER_BIN + '\n');
  const go = spawnSync('go', ['build', '-o', env.IMLEDGER_BIN, './cmd/imledger'], { cwd: root, stdio: 'inherit' });
  if (go.status !== 0) {
    process.stderr.write('go build failed (is Go installed?)\n');
    process.exit(1);
  }
}
const major = Number(process.versions.node.split('.')[0]);
const flags = major < 22 ? ['--experimental-websocket'] : [];
/** testFiles lists the *.test.js files under dir, so helpers are not run as tests. */
function testFiles(dir) {
  return readdirSync(path.join(sdk, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? testFiles(path.join(dir, e.name)) : e.name.endsWith('.test.js') ? [path.join(dir, e.name)] : []);
}
const files = process.argv.slice(2);
const run = spawnSync(process.execPath, [...flags, '--test', '--test-concurrency=1', ...(files.length ? files : testFiles('test'))],
  { cwd: sdk, env, stdio: 'inherit' });
if (built) { rmSync(built, { recursive: true, force: true }); }
process.exit(run.status ?? 1);
