// Egress through Node's own clients, run on the test internet (python/egress.py has the attacks).
// Usage: node egress.js CONTROL_URL MODE [ARGS...] MARKER
//
// First the control: GET CONTROL_URL, printing "CONTROL ok" when the test server answers. An
// https:// URL is verified as Node does by default (its CA store and NODE_EXTRA_CA_CERTS), so
// it passes only in a sandbox that trusts the test CA. Then:
//
//   none         the control alone
//   https URL    a GET of URL, verified by default: "HTTPS verified" or "HTTPS refused" with
//                Node's reason (UNABLE_TO_VERIFY_LEAF_SIGNATURE, SELF_SIGNED_CERT_IN_CHAIN...)
//
// Every address is on the test internet; nothing here reaches beyond it.
'use strict';
const http = require('http');
const https = require('https');

const ARGS = process.argv.slice(2, -1); // the last word is the runner's marker
const TIMEOUT_MS = 4000;

function say(line) {
  process.stdout.write(line + '\n');
}

// Resolves to {body} or {error}; never rejects.
function get(url) {
  const client = url.startsWith('https:') ? https : http;
  return new Promise((resolve) => {
    const request = client.get(url, { timeout: TIMEOUT_MS }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk) => { body += chunk; });
      response.on('end', () => resolve({ body }));
      response.on('error', (error) => resolve({ error }));
    });
    request.on('timeout', () => request.destroy(new Error(`no answer in ${TIMEOUT_MS} ms`)));
    request.on('error', (error) => resolve({ error }));
  });
}

function answered(body) {
  return typeof body === 'string' && (body.startsWith('server=') || body.startsWith('host-'));
}

async function control(url) {
  const { body, error } = await get(url);
  say(answered(body) ? 'CONTROL ok' : `CONTROL failed: ${error ? `${error.code} ${error.message}` : JSON.stringify(body)}`);
}

async function httpsGet(url) {
  const { body, error } = await get(url);
  if (error && error.code && /CERT|SIGNATURE|ISSUER/.test(error.code)) {
    say(`HTTPS refused: ${error.code} (${error.message})`);
  } else if (error) {
    say(`HTTPS failed: ${error.code} ${error.message}`);
  } else {
    say(`HTTPS verified: ${body.trim()}`);
  }
}

async function main() {
  const [controlUrl, mode, ...rest] = ARGS;
  await control(controlUrl);
  const modes = { none: async () => {}, https: httpsGet };
  if (!modes[mode]) throw new Error(`unknown mode ${mode}`);
  await modes[mode](...rest);
}

main();
