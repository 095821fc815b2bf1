// A client for `smolbox serve` (docs/api.md), on node's own http and https: a unix socket or TCP,
// as the Python SDK (sdk/python) does.
//
//   import { Client } from './smolbox.js';
//   const client = new Client('unix:/run/smolbox/api.sock');
//   const result = await client.run({ argv: ['/usr/bin/python3', '-c', 'print(42)'] });
//   const sb = await client.createSandbox({ limits: { memory_mib: 256 } });
//   await sb.writeFile('/work/in.csv', 'a,b\n1,2\n');
//   const { result: r, stdout } = await sb.exec(['cat', '/work/in.csv']);
//   await sb.remove();
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';

// A reply other than 2xx: the server's {"error": {"field", "message"}} with the status.
export class ApiError extends Error {
  constructor(status, body, retryAfter) {
    const error = body && typeof body === 'object' && body.error ? body.error : {};
    super(`${status}${error.field ? ` ${error.field}` : ''}: ${error.message || JSON.stringify(body)}`);
    this.name = 'ApiError';
    this.status = status;
    this.field = error.field;
    this.body = body;
    this.retryAfter = retryAfter; // seconds, for a 429 that says
  }
}

function defaultAddress() {
  if (process.env.SMOLBOX_API) return process.env.SMOLBOX_API;
  if (process.getuid && process.getuid() === 0) return 'unix:/run/smolbox/api.sock';
  const runtime = process.env.XDG_RUNTIME_DIR || `/run/user/${process.getuid()}`;
  return `unix:${path.join(runtime, 'smolbox', 'api.sock')}`;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export class Client {
  // address: "unix:PATH", "http://HOST:PORT" or "https://HOST:PORT" (default $SMOLBOX_API, or
  // the server's own default socket). token: a TCP server's (default $SMOLBOX_TOKEN). ca: PEM
  // to verify an https server by. retryFor: seconds a 429 is retried for, as Retry-After says.
  constructor(address = defaultAddress(), { token = process.env.SMOLBOX_TOKEN, ca, timeoutMs = 300000, retryFor = 60 } = {}) {
    this.timeoutMs = timeoutMs;
    this.retryFor = retryFor;
    this.headers = token ? { Authorization: `Bearer ${token}` } : {};
    if (address.startsWith('unix:')) {
      this.transport = http;
      this.base = { socketPath: address.slice('unix:'.length), host: 'localhost' };
    } else {
      const url = new URL(address);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`address: ${address} is not unix:PATH, http:// or https://`);
      this.transport = url.protocol === 'https:' ? https : http;
      this.base = { host: url.hostname, port: url.port, ...(ca ? { ca } : {}) };
    }
  }

  // One request: its status, headers and whole body (a Buffer).
  raw(method, urlPath, body, contentType = 'application/json') {
    return new Promise((resolve, reject) => {
      const headers = { ...this.headers };
      if (body !== undefined) {
        headers['Content-Type'] = contentType;
        headers['Content-Length'] = Buffer.byteLength(body);
      }
      const request = this.transport.request({ ...this.base, method, path: urlPath, headers, timeout: this.timeoutMs }, (response) => {
        const chunks = [];
        response.on('data', (chunk) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode, headers: response.headers, body: Buffer.concat(chunks) }));
        response.on('error', reject);
      });
      request.on('timeout', () => request.destroy(new Error(`${method} ${urlPath}: no reply in ${this.timeoutMs} ms`)));
      request.on('error', reject);
      if (body !== undefined) request.write(body);
      request.end();
    });
  }

  // A request whose reply must be 2xx; 429 is retried within retryFor. Returns {status, headers, body}.
  async request(method, urlPath, body, contentType) {
    const deadline = Date.now() + this.retryFor * 1000;
    for (let attempt = 0; ; attempt++) {
      const reply = await this.raw(method, urlPath, body, contentType);
      if (reply.status >= 200 && reply.status < 300) return reply;
      const retryAfter = Number(reply.headers['retry-after']) || undefined;
      const error = new ApiError(reply.status, parse(reply.body), retryAfter);
      const wait = (retryAfter || Math.min(2 ** attempt, 8)) * 1000 * (0.5 + Math.random() / 2);
      if (reply.status !== 429 || Date.now() + wait > deadline) throw error;
      await sleep(wait);
    }
  }

  async json(method, urlPath, value) {
    const reply = await this.request(method, urlPath, value === undefined ? undefined : JSON.stringify(value));
    return parse(reply.body);
  }

  // POST /v1/run: a RunSpec in, the run's result out (whatever the workload did).
  run(spec) {
    return this.json('POST', '/v1/run', spec);
  }

  // POST /v1/sandboxes: a RunSpec without argv; its env, workdir and limits are each exec's defaults.
  async createSandbox(spec = {}) {
    const created = await this.json('POST', '/v1/sandboxes', spec);
    return new Sandbox(this, created.id);
  }

  health() {
    return this.json('GET', '/v1/health');
  }
}

function parse(buffer) {
  const text = buffer.toString('utf8');
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function filePath(sandboxPath) {
  if (!sandboxPath.startsWith('/')) throw new Error(`path: ${sandboxPath} is not absolute`);
  return sandboxPath.slice(1).split('/').map(encodeURIComponent).join('/');
}

export class Sandbox {
  constructor(client, id) {
    this.client = client;
    this.id = id;
  }

  // POST /v1/sandboxes/{id}/exec: the NDJSON stream read to its result. Returns {result, stdout, stderr}.
  async exec(argv, { env, workdir, timeoutMs, stdin } = {}) {
    const order = { argv, ...(env ? { env } : {}), ...(workdir ? { workdir } : {}),
      ...(timeoutMs ? { timeout_ms: timeoutMs } : {}), ...(stdin !== undefined ? { stdin } : {}) };
    const reply = await this.client.request('POST', `/v1/sandboxes/${encodeURIComponent(this.id)}/exec`, JSON.stringify(order));
    let stdout = '';
    let stderr = '';
    let result;
    for (const line of reply.body.toString('utf8').split('\n')) {
      if (!line) continue;
      const event = JSON.parse(line);
      if (event.type === 'stdout') stdout += event.data;
      else if (event.type === 'stderr') stderr += event.data;
      else if (event.type === 'result') result = event.result;
    }
    if (!result) throw new Error(`exec in ${this.id}: the stream ended without a result`);
    return { result, stdout, stderr };
  }

  // PUT /v1/sandboxes/{id}/files/{path}: text or bytes become the file, its directories made.
  writeFile(sandboxPath, data) {
    return this.client.request('PUT', `/v1/sandboxes/${encodeURIComponent(this.id)}/files/${filePath(sandboxPath)}`,
      Buffer.from(data), 'application/octet-stream');
  }

  // GET /v1/sandboxes/{id}/files/{path}: the file's bytes (a Buffer).
  async readFile(sandboxPath) {
    const reply = await this.client.request('GET', `/v1/sandboxes/${encodeURIComponent(this.id)}/files/${filePath(sandboxPath)}`);
    return reply.body;
  }

  async remove() {
    await this.client.request('DELETE', `/v1/sandboxes/${encodeURIComponent(this.id)}`);
  }
}
