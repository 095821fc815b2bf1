// Memory attacks. Usage: node memory.js MODE MARKER
//
// Each bomb stops at LIMIT (2 GiB) and prints what it holds as `ALLOCATED <MiB> MiB`; reaching
// the limit prints BREACH. Memory is filled, not just reserved, so it counts.
'use strict';
const fs = require('fs');
const { Worker, isMainThread } = require('worker_threads');

const ARGS = process.argv.slice(2, -1); // the last word is the runner's marker
const MIB = 1 << 20;
const LIMIT_MIB = 2048;

function say(line) {
  process.stdout.write(line + '\n');
}

const modes = {
  buffer() {
    const held = [];
    let total = 0;
    while (total < LIMIT_MIB) {
      held.push(Buffer.alloc(64 * MIB, 0x5a)); // outside the V8 heap, so no heap limit applies
      total += 64;
      say(`ALLOCATED ${total} MiB`);
    }
    say(`BREACH held ${total} MiB of Buffers`);
  },
  wasm() {
    // WebAssembly memory is an mmap that grows in place: the closest thing to mmap in JS.
    const memory = new WebAssembly.Memory({ initial: 0, maximum: 32768 }); // 64 KiB pages
    let total = 0;
    while (total < LIMIT_MIB) {
      const before = memory.buffer.byteLength;
      memory.grow(1024);
      new Uint8Array(memory.buffer, before, 64 * MIB).fill(0x5a);
      total += 64;
      say(`ALLOCATED ${total} MiB`);
    }
    say(`BREACH grew WebAssembly memory to ${total} MiB`);
  },
  threads() {
    // Each worker holds 32 MiB of its own; 64 workers reach the limit.
    let workers = 0;
    let total = 0;
    const next = () => {
      // Workers cost memory of their own: count it too, so that RSS stays near the limit.
      if (total >= LIMIT_MIB || process.memoryUsage.rss() >= LIMIT_MIB * MIB) {
        say(`BREACH ${workers} workers hold ${total} MiB`);
        process.exit(0);
      }
      const w = new Worker(__filename, { argv: ['hold', 'worker'] });
      w.on('message', () => {
        workers++;
        total += 32;
        say(`THREADS ${workers} ALLOCATED ${total} MiB`);
        next();
      });
      w.on('error', (e) => {
        say(`STOPPED at ${workers} workers: ${e.message}`);
        process.exit(0);
      });
    };
    next();
  },
  shm() {
    // /dev/shm is memory on most hosts; a sandbox must count it against some limit.
    const path = `/dev/shm/smolvm-check-${process.pid}`;
    let fd;
    try {
      fd = fs.openSync(path, 'wx', 0o600);
    } catch (e) {
      say(`NO SHM ${e.message}`);
      return;
    }
    const block = Buffer.alloc(MIB, 0x5a);
    let total = 0;
    try {
      while (total < LIMIT_MIB) {
        fs.writeSync(fd, block);
        total++;
        if (total % 16 === 0) say(`SHM ${total} MiB`);
      }
      say(`BREACH wrote ${total} MiB into /dev/shm`);
    } catch (e) {
      say(`SHM ${total} MiB`);
      say(`SHM STOPPED: ${e.message}`);
    } finally {
      fs.closeSync(fd);
      fs.unlinkSync(path);
    }
  },
};

if (isMainThread) {
  modes[ARGS[0]]();
} else {
  const { parentPort } = require('worker_threads');
  globalThis.held = Buffer.alloc(32 * MIB, 0x5a); // global, so the collector cannot free it
  parentPort.postMessage(globalThis.held.length);
  // Held until the process ends (the main thread exits at BREACH or STOPPED, or a limit kills
  // it): a worker that ended on a timer would free its 32 MiB, and on a slow host the count
  // of ALLOCATED would then run past what is held at once.
  setInterval(() => {}, 1 << 30);
}
