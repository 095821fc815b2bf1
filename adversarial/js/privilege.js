// Privilege attacks Node can make itself. Usage: node privilege.js MODE MARKER
//
// setuid:        BREACH if setgid(0) or setuid(0) succeeds
// capabilities:  BREACH if the effective capability set (CapEff) is not empty
// The syscall-level attacks (mount, unshare, chroot, ptrace, keyctl, bpf, perf_event_open,
// io_uring, userfaultfd, modules, the clock) need ctypes: python/privilege.py.
'use strict';
const fs = require('fs');

const ARGS = process.argv.slice(2, -1); // the last word is the runner's marker

function say(line) {
  process.stdout.write(line + '\n');
}

const modes = {
  setuid() {
    say(`UID ${process.getuid()} EUID ${process.geteuid()}`);
    for (const [label, call] of [['setgid(0)', () => process.setgid(0)], ['setuid(0)', () => process.setuid(0)]]) {
      try {
        call();
      } catch (e) {
        say(`BLOCKED ${label}: ${e.message}`);
        continue;
      }
      say(`BREACH ${label} succeeded`);
    }
  },
  capabilities() {
    const line = fs.readFileSync('/proc/self/status', 'utf8').split('\n').find((l) => l.startsWith('CapEff:'));
    const value = BigInt('0x' + line.split(/\s+/)[1]);
    say(`CapEff ${value.toString(16).padStart(16, '0')}`);
    if (value !== 0n) say(`BREACH effective capabilities 0x${value.toString(16)}`);
  },
};

modes[ARGS[0]]();
