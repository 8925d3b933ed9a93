// The quick start in the README's "The TypeScript SDK" section runs as written against a real
// server (with the server's address and this package's path put in).

import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { startServer } from './harness.js';

const here = path.dirname(fileURLToPath(import.meta.url));

test('the README quick start runs', async () => {
  const readme = readFileSync(path.join(here, '../../../../README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('### The TypeScript SDK'));
  const code = /```js\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(code, 'a js block in the section');
  const s = await startServer({ after });
  const script = code
    .replaceAll('http://localhost:8080', s.base)
    .replace("from '@imledger/sdk'", 'from ' + JSON.stringify(pathToFileURL(path.join(here, '../src/index.js')).href))
    + '\nexport { client, ack, messages };\n';
  const file = path.join(s.dir, 'quickstart.mjs');
  writeFileSync(file, script);
  const logs = [];
  const log = console.log;
  console.log = (...args) => logs.push(args.join(' '));
  try {
    const { client, ack } = await import(pathToFileURL(file).href);
    assert.equal(ack.seq, '1');
    const deadline = Date.now() + 10000;
    while (!logs.some(messageLogged) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    client.close();
  } finally {
    console.log = log;
  }
  assert.ok(logs.includes('connection: ready'), logs.join('\n'));
  assert.ok(logs.some(messageLogged), 'the message event: ' + logs.join('\n'));
});

/** messageLogged: the quick start's message listener logged message 1. */
function messageLogged(line) {
  return /^grp[0-9]+ 1 [0-9]+ /.test(line);
}

test('the package README quick start runs', async () => {
  const readme = readFileSync(path.join(here, '../README.md'), 'utf8');
  const code = /```js\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.ok(code, 'a js block in the README');
  assert.ok(code.split('\n').length <= 26, 'a short quick start');
  const s = await startServer({ after });
  const script = code
    .replaceAll('http://localhost:8080', s.base)
    .replace("from '@imledger/sdk'", 'from ' + JSON.stringify(pathToFileURL(path.join(here, '../src/index.js')).href))
    + '\nexport { client, ack };\n';
  const file = path.join(s.dir, 'sdk-quickstart.mjs');
  writeFileSync(file, script);
  const logs = [];
  const log = console.log;
  console.log = (...args) => logs.push(args.join(' '));
  try {
    const { client, ack } = await import(pathToFileURL(file).href);
    assert.equal(ack.seq, '1');
    const read = (line) => /^grp[0-9]+ unread 0 mentions 0$/.test(line);
    const deadline = Date.now() + 10000;
    while (!logs.some(read) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(client.channel.state, 'active');
    client.close();
    assert.ok(logs.some(read), 'the conversation event of the group: ' + logs.join('\n'));
  } finally {
    console.log = log;
  }
});
