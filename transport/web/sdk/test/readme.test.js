// The quick start in docs/clients.md's "The TypeScript SDK" section runs as written against a real
// server (with the server's address and this package's path put in).

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { startServer } from './harness.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * runQuickStart runs the first js block of readme (the package's name put as this package's
 * path, the server's address for localhost:8080) against a fresh server, with console.log
 * collected, and resolves with the block's exported names and the lines it logged; until(line)
 * says which logged line the block has done its work at (waited for up to 10 s).
 *
 * @param {string} readme
 * @param {string[]} names
 * @param {(line: string) => boolean} until
 */
async function runQuickStart(readme, names, until) {
  const code = /```js\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.ok(code, 'a js block');
  const s = await startServer({ after });
  const script = code
    .replaceAll('http://localhost:8080', s.base)
    .replace("from '@imledger/sdk'", 'from ' + JSON.stringify(pathToFileURL(path.join(here, '../src/index.js')).href))
    + `\nexport { ${names.join(', ')} };\n`;
  const file = path.join(s.dir, 'quickstart.mjs');
  writeFileSync(file, script);
  /** @type {string[]} */
  const logs = [];
  const log = console.log;
  console.log = (...args) => logs.push(args.join(' '));
  try {
    const mod = await import(pathToFileURL(file).href);
    const deadline = Date.now() + 10000;
    while (!logs.some(until) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    mod.client.close();
    return { mod, logs, lines: code.split('\n').length };
  } finally {
    console.log = log;
  }
}

test('the quick start of docs/clients.md runs', async () => {
  const doc = readFileSync(path.join(here, '../../../../docs/clients.md'), 'utf8');
  const { mod, logs } = await runQuickStart(doc.slice(doc.indexOf('### The TypeScript SDK')), ['client', 'ack', 'messages'], messageLogged);
  assert.equal(mod.ack.seq, '1');
  assert.ok(logs.includes('connection: ready'), logs.join('\n'));
  assert.ok(logs.some(messageLogged), 'the message event: ' + logs.join('\n'));
});

/** messageLogged: the quick start's message listener logged message 1. */
function messageLogged(line) {
  return /^grp[0-9]+ 1 [0-9]+ /.test(line);
}

test('the package README quick start runs', async () => {
  const read = (/** @type {string} */ line) => /^grp[0-9]+ unread 0 mentions 0$/.test(line);
  const { mod, logs, lines } = await runQuickStart(readFileSync(path.join(here, '../README.md'), 'utf8'), ['client', 'ack'], read);
  assert.ok(lines <= 26, 'a short quick start: ' + lines + ' lines');
  assert.equal(mod.ack.seq, '1');
  assert.ok(logs.some(read), 'the conversation event of the group: ' + logs.join('\n'));
});
