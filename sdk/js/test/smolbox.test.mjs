// The JavaScript client and the LangChain.js tool against a real `smolbox serve` on a unix
// socket, on the ns backend. $SMOLBOX names the binary (ctest sets it).
//
//   SMOLBOX=build/bin/smolbox node --test sdk/js/test/
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { after, before, test } from 'node:test';

import { ApiError, Client } from '../smolbox.js';
import { smolboxRunCodeTool } from '../langchain.js';

const smolbox = process.env.SMOLBOX;
assert.ok(smolbox, 'set SMOLBOX to the smolbox binary');

let server;
let dir;
let client;

// smolbox serve on a socket of its own, once it says it listens.
function startServer(socket, flags = []) {
  const child = spawn(smolbox, ['serve', '--listen', `unix:${socket}`, ...flags], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    const lines = readline.createInterface({ input: child.stdout });
    const timer = setTimeout(() => reject(new Error('smolbox serve did not start in 30 s')), 30000);
    lines.on('line', (line) => {
      if (line.startsWith('smolbox serve: listening on ')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.on('exit', (code) => reject(new Error(`smolbox serve exited ${code}`)));
  });
}

function stopServer(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.on('exit', resolve);
    child.kill('SIGTERM');
  });
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smolbox-js-'));
  server = await startServer(path.join(dir, 'api.sock'));
  client = new Client(`unix:${path.join(dir, 'api.sock')}`);
});

after(async () => {
  await stopServer(server);
  fs.rmSync(dir, { recursive: true, force: true });
});

test('run: a RunSpec in, the result out, with the limits the spec sets', async () => {
  const result = await client.run({ backend: 'ns', argv: ['/usr/bin/python3', '-c', 'import sys; print(input()[::-1]); sys.exit(3)'], stdin: 'abc\n' });
  assert.equal(result.status, 'exited');
  assert.equal(result.exit_code, 3);
  assert.equal(result.stdout, 'cba\n');
  const slow = await client.run({ backend: 'ns', argv: ['/usr/bin/python3', '-c', 'while True: pass'], limits: { timeout_ms: 1000 } });
  assert.equal(slow.status, 'timeout');
});

test('a bad spec is an ApiError naming the field', async () => {
  await assert.rejects(client.run({ argv: ['/bin/true'], limits: { memroy_mib: 5 } }), (e) => {
    assert.ok(e instanceof ApiError);
    assert.equal(e.status, 400);
    assert.equal(e.field, 'limits.memroy_mib');
    return true;
  });
});

test('a sandbox: files in and out, execs with their output, then removed', async () => {
  const sb = await client.createSandbox({ backend: 'ns', env: { KEPT: 'yes' } });
  try {
    await sb.writeFile('/work/in.csv', 'a,b\n1,2\n');
    const ran = await sb.exec(['/usr/bin/python3', '-c',
      "import csv, os, sys\nrows = list(csv.DictReader(open('/work/in.csv')))\n" +
      "open('/work/out.txt', 'w').write(rows[0]['b'] + os.environ['KEPT'])\nprint('done'); print('warn', file=sys.stderr)"]);
    assert.equal(ran.result.status, 'exited');
    assert.equal(ran.stdout, 'done\n');
    assert.equal(ran.stderr, 'warn\n');
    assert.equal((await sb.readFile('/work/out.txt')).toString(), '2yes');
    await assert.rejects(sb.readFile('/work/absent'), (e) => e.status === 404);
  } finally {
    await sb.remove();
  }
  await assert.rejects(sb.exec(['/bin/true']), (e) => e.status === 404);
});

test('a server over its limit answers 429, which the client retries until a slot frees', async () => {
  const socket = path.join(dir, 'tight.sock');
  const tight = await startServer(socket, ['--max-concurrent-execs', '1', '--max-queued', '0']);
  try {
    const patient = new Client(`unix:${socket}`, { retryFor: 60 });
    const impatient = new Client(`unix:${socket}`, { retryFor: 0 });
    const spec = { backend: 'ns', argv: ['/usr/bin/python3', '-c', 'import time; time.sleep(1); print(1)'] };
    const first = patient.run(spec);
    await new Promise((resolve) => setTimeout(resolve, 300)); // the first holds the one slot
    await assert.rejects(impatient.run(spec), (e) => e.status === 429 && e.retryAfter === 1);
    const second = await patient.run(spec);
    assert.equal(second.stdout, '1\n');
    assert.equal((await first).stdout, '1\n');
  } finally {
    await stopServer(tight);
  }
});

test('the LangChain.js tool runs the code in a sandbox and tells the model how it ended', async () => {
  const runCode = smolboxRunCodeTool(client, { backend: 'ns', limits: { timeout_ms: 5000 } });
  assert.equal(runCode.name, 'smolbox_run_code');
  const python = await runCode.invoke({ code: 'print(6 * 7)' });
  assert.equal(python, 'exit code 0\n--- stdout ---\n42\n');
  const js = await runCode.invoke({ language: 'javascript', code: 'console.log([1, 2].map((x) => x * 3).join(","))' });
  assert.match(js, /3,6/);
  const slow = await runCode.invoke({ code: 'while True: pass' });
  assert.match(slow, /^timeout: the wall-time limit \(limits\.timeout_ms\) ended the code/);
  // No network inside.
  const net = await runCode.invoke({ language: 'shell', code: 'cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d " "' });
  assert.equal(net, 'exit code 0\n--- stdout ---\nlo\n');
  // A call the schema refuses never reaches the server.
  await assert.rejects(runCode.invoke({ language: 'ruby', code: 'puts 1' }));
  // As a model's tool call: a ToolMessage for the call's id.
  const message = await runCode.invoke({ type: 'tool_call', id: 'call-1', name: 'smolbox_run_code', args: { code: 'print(1)' } });
  assert.equal(message.tool_call_id, 'call-1');
  assert.equal(message.content, 'exit code 0\n--- stdout ---\n1\n');
});
