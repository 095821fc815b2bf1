// Output floods. Usage: node output.js MODE MARKER
//
// Each flood stops at 64 MiB, then says `FLOOD DONE` on the other stream: a sandbox that caps
// output ends the run before that line. Writes are synchronous, so nothing is left buffered.
'use strict';
const fs = require('fs');

const ARGS = process.argv.slice(2, -1); // the last word is the runner's marker
const MIB = 1 << 20;
const FLOOD = 64 * MIB;

function flood(fd, chunk) {
  let written = 0;
  while (written < FLOOD) {
    try {
      written += fs.writeSync(fd, chunk);
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e;
    }
  }
  return written;
}

const modes = {
  stdout() {
    const n = flood(1, Buffer.from('smolvm-check stdout flood line\n'.repeat(32768)));
    fs.writeSync(2, `FLOOD DONE ${n} bytes on stdout\n`);
  },
  stderr() {
    const n = flood(2, Buffer.from('smolvm-check stderr flood line\n'.repeat(32768)));
    fs.writeSync(1, `FLOOD DONE ${n} bytes on stderr\n`);
  },
  endless_line() {
    const n = flood(1, Buffer.alloc(MIB, 'A'));
    fs.writeSync(1, '\n');
    fs.writeSync(2, `FLOOD DONE ${n} bytes on one line\n`);
  },
};

modes[ARGS[0]]();
