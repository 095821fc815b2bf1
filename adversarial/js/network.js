// Network attacks. Usage: node network.js MODE [ARGS...] MARKER
//
// tcp HOST PORT      connect, print what the server sends (a canary token) and BREACH
// udp HOST PORT      connect a UDP socket and send one datagram: BREACH if it leaves
// dns                a resolver is reachable (same rule as python/network.py)
// unix PATH          connect to a host unix socket by path and print what it sends
//
// Node has no raw, packet or netlink sockets, and it pads an abstract socket's name to the
// whole sun_path (108 bytes), so it cannot reach a listener bound to the exact name:
// python/network.py covers those.
'use strict';
const dgram = require('dgram');
const fs = require('fs');
const net = require('net');

const ARGS = process.argv.slice(2, -1); // the last word is the runner's marker

function say(line) {
  process.stdout.write(line + '\n');
}

function receive(options, label) {
  const sock = net.connect(options);
  let data = '';
  let connected = false;
  const finish = () => {
    if (connected) say(`BREACH connected to ${label}; received: ${data.trim()}`);
    sock.destroy();
  };
  sock.setTimeout(3000, finish);
  sock.on('connect', () => { connected = true; });
  sock.on('data', (chunk) => { data += chunk.toString(); });
  sock.on('end', finish);
  sock.on('error', (e) => say(`BLOCKED ${label}: ${e.message}`));
}

function dnsQuery(name) {
  const header = Buffer.from([0x53, 0x43, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
  const labels = name.split('.').filter(Boolean)
    .map((p) => Buffer.concat([Buffer.from([p.length]), Buffer.from(p)]));
  return Buffer.concat([header, ...labels, Buffer.from([0, 0, 1, 0, 1])]);
}

function nameservers() {
  let text;
  try {
    text = fs.readFileSync('/etc/resolv.conf', 'utf8');
  } catch (e) {
    say(`NO RESOLVER: ${e.message}`);
    return [];
  }
  const found = text.split('\n').map((l) => l.trim().split(/\s+/))
    .filter((w) => w.length >= 2 && w[0] === 'nameserver').map((w) => w[1]);
  if (found.length === 0) say('NO RESOLVER: /etc/resolv.conf names no nameserver');
  return found;
}

function isLoopback(addr) {
  return addr === '::1' || addr.startsWith('127.');
}

const modes = {
  tcp(host, port) {
    receive({ host, port: Number(port) }, `tcp ${host}:${port}`);
  },
  udp(host, port) {
    const sock = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
    sock.connect(Number(port), host, (err) => {
      if (err) {
        say(`BLOCKED udp ${host}:${port}: ${err.message}`);
        sock.close();
        return;
      }
      sock.send('smolvm-check udp probe\n', (e) => {
        if (e) say(`BLOCKED udp ${host}:${port}: ${e.message}`);
        else say(`BREACH udp datagram sent to ${host}:${port}`);
        sock.close();
      });
    });
  },
  dns() {
    // A nameserver on loopback is reachable from any sandbox with a loopback, so there only a
    // reply counts; any other counts as reached when a UDP socket can connect to it (connect()
    // on UDP only looks up a route and sends nothing).
    for (const server of nameservers()) {
      const addr = server.split('%')[0];
      if (!net.isIP(addr)) {
        say(`SKIPPED nameserver ${server}`);
        continue;
      }
      const sock = dgram.createSocket(net.isIPv6(addr) ? 'udp6' : 'udp4');
      const timer = setTimeout(() => { say(`BLOCKED nameserver ${addr}: no reply`); sock.close(); }, 2000);
      sock.on('error', (e) => { say(`BLOCKED nameserver ${addr}: ${e.message}`); clearTimeout(timer); sock.close(); });
      sock.on('message', (msg) => {
        say(`BREACH nameserver ${addr} answered (${msg.length} bytes)`);
        clearTimeout(timer);
        sock.close();
      });
      sock.connect(53, addr, (err) => {
        if (err) {
          say(`BLOCKED nameserver ${addr}: ${err.message}`);
          clearTimeout(timer);
          sock.close();
          return;
        }
        if (!isLoopback(addr)) {
          say(`BREACH route to nameserver ${addr} from /etc/resolv.conf`);
          clearTimeout(timer);
          sock.close();
          return;
        }
        sock.send(dnsQuery('localhost'));
      });
    }
  },
  unix(path) {
    receive({ path }, `unix ${path}`);
  },
};

modes[ARGS[0]](...ARGS.slice(1));
