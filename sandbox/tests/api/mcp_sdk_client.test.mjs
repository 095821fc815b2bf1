// `smolbox mcp` driven by the official TypeScript MCP SDK (@modelcontextprotocol/sdk, from npm,
// which scripts/setup installs into tools/): its Client over its stdio transport, as an agent
// host runs it. Nothing here speaks the protocol by hand.
//
//   SMOLBOX=build/bin/smolbox SMOLBOX_TOOLS=tools node --test sandbox/tests/api/mcp_sdk_client.test.mjs
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import path from 'node:path';
import { after, before, test } from 'node:test';

const smolbox = process.env.SMOLBOX;
const tools = process.env.SMOLBOX_TOOLS;
assert.ok(smolbox && tools, 'set SMOLBOX to the smolbox binary and SMOLBOX_TOOLS to tools/');
const requireFromTools = createRequire(path.join(path.resolve(tools), 'package.json'));
const { Client } = requireFromTools('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = requireFromTools('@modelcontextprotocol/sdk/client/stdio.js');

let client;
let transport;

before(async () => {
  transport = new StdioClientTransport({ command: smolbox, args: ['mcp', '--backend', 'ns'], stderr: 'inherit' });
  client = new Client({ name: 'smolbox-sdk-test', version: '1' });
  await client.connect(transport);
});

after(async () => {
  await client.close();
});

function text(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
}

test('initialize: the SDK accepts the version smolbox answers and reads its instructions', () => {
  assert.equal(client.getServerVersion().name, 'smolbox');
  assert.match(client.getInstructions(), /run_code/);
  assert.ok(client.getServerCapabilities().tools);
});

test('the six tools are listed with input schemas the SDK takes', async () => {
  const { tools: listed } = await client.listTools();
  assert.deepEqual(listed.map((t) => t.name).sort(),
    ['create_sandbox', 'exec', 'read_file', 'remove_sandbox', 'run_code', 'write_file']);
  const runCode = listed.find((t) => t.name === 'run_code');
  assert.equal(runCode.inputSchema.type, 'object');
  // code, or a command in its place; and the RunSpec's fields by name, as POST /v1/run takes them.
  for (const field of ['code', 'command', 'language', 'stdin', 'limits', 'env', 'image', 'egress', 'mounts', 'ca_bundle']) {
    assert.ok(field in runCode.inputSchema.properties, `run_code takes ${field}`);
  }
});

test('run_code runs Python in a fresh sandbox and reports its exit code', async () => {
  const result = await client.callTool({
    name: 'run_code',
    arguments: { code: 'import sys; print(input()[::-1]); sys.exit(3)', stdin: 'abc\n' },
  });
  assert.equal(result.isError, false, text(result));
  assert.equal(result.structuredContent.stdout, 'cba\n');
  assert.equal(result.structuredContent.exit_code, 3);
  // No network inside: loopback only.
  const net = await client.callTool({
    name: 'run_code',
    arguments: {
      language: 'javascript',
      code: "console.log(require('fs').readFileSync('/proc/net/dev', 'utf8').split('\\n').slice(2)" +
        ".filter(Boolean).map((l) => l.split(':')[0].trim()).join(','))",
    },
  });
  assert.equal(net.structuredContent.stdout, 'lo\n', text(net));
});

test('a limit the code breaks is a tool error naming the limit', async () => {
  const result = await client.callTool({
    name: 'run_code',
    arguments: { code: 'while True: pass', limits: { timeout_ms: 1000 } },
  });
  assert.equal(result.isError, true);
  assert.equal(result.structuredContent.status, 'timeout');
  assert.match(text(result), /limits\.timeout_ms/);
});

test('a sandbox keeps files across calls: write, exec, read, then remove', async () => {
  const created = await client.callTool({ name: 'create_sandbox', arguments: { env: { KEPT: 'yes' } } });
  assert.equal(created.isError, false, text(created));
  const id = created.structuredContent.sandbox_id;
  assert.ok(id);
  const written = await client.callTool({
    name: 'write_file',
    arguments: { sandbox_id: id, path: '/work/in.csv', content: 'a,b\n1,2\n' },
  });
  assert.equal(written.isError, false, text(written));
  const ran = await client.callTool({
    name: 'exec',
    arguments: {
      sandbox_id: id,
      code: "import csv, os\nrows = list(csv.DictReader(open('/work/in.csv')))\n" +
        "open('/work/out.txt', 'w').write(rows[0]['b'] + os.environ['KEPT'])",
    },
  });
  assert.equal(ran.isError, false, text(ran));
  const read = await client.callTool({ name: 'read_file', arguments: { sandbox_id: id, path: '/work/out.txt' } });
  assert.equal(text(read), '2yes');
  const removed = await client.callTool({ name: 'remove_sandbox', arguments: { sandbox_id: id } });
  assert.equal(removed.isError, false, text(removed));
  const gone = await client.callTool({ name: 'exec', arguments: { sandbox_id: id, command: ['/bin/true'] } });
  assert.equal(gone.isError, true);
  assert.equal(gone.structuredContent.error.field, 'sandbox_id');
});

test('an unknown argument is a tool error naming it, and the session goes on', async () => {
  const result = await client.callTool({ name: 'run_code', arguments: { code: 'print(1)', netwrok: true } });
  assert.equal(result.isError, true);
  assert.match(text(result), /netwrok/);
  const next = await client.callTool({ name: 'run_code', arguments: { code: 'print(2)' } });
  assert.equal(next.structuredContent.stdout, '2\n');
});
