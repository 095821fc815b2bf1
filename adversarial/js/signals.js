// Signals and lifetime. Usage: node signals.js MODE [ARGS...] MARKER
//
// daemon OUT  start a detached node (its own session, stdio to /dev/null, the marker in its
//             argv) that outlives the run: it sleeps 3 s, writes OUT/late.txt and exits.
// sigurg      kill(-1, SIGURG): every process this one may signal. SIGURG is ignored by
//             default; the runner's host-side detector handles it and reports who sent it.
// TIOCSTI needs ioctl(2), which Node does not expose: python/signals.py has it.
'use strict';
const fs = require('fs');
const path = require('path');
const { spawn } = require('child_process');

const MARKER = process.argv[process.argv.length - 1];
const ARGS = process.argv.slice(2, -1); // the last word is the runner's marker

function say(line) {
  process.stdout.write(line + '\n');
}

const modes = {
  daemon(out) {
    const child = spawn(process.execPath, [__filename, 'daemon_body', out, MARKER], {
      detached: true,
      stdio: 'ignore',
    });
    child.unref();
    child.on('spawn', () => say('DAEMON STARTED'));
    child.on('error', (e) => say(`could not start the daemon: ${e.message}`));
  },
  daemon_body(out) {
    setTimeout(() => {
      try {
        fs.writeFileSync(path.join(out, 'late.txt'), 'written by a daemon after the run\n');
      } finally {
        process.exit(0);
      }
    }, 3000);
  },
  sigurg() {
    try {
      process.kill(-1, 'SIGURG');
    } catch (e) {
      say(`kill(-1, SIGURG): ${e.message}`);
      return;
    }
    say('SENT SIGURG to every process allowed');
  },
};

modes[ARGS[0]](...ARGS.slice(1));
