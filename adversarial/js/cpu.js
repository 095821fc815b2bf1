// CPU attacks. Usage: node cpu.js MODE MARKER
//
// Every loop ends by itself after BOUND_MS, well past the timeouts the catalog sets, so that a
// sandbox without a timeout shows up as a run that lasted that long and exited normally.
// share is python/cpu.py's: two threads spin for SHARE_MS, and CPU_SHARE_PERMILLE says how much
// CPU the process got per second of wall time. cpu_in_children is python/cpu.py's: CHILDREN
// processes in turn, each under a per-process RLIMIT_CPU, use several seconds of CPU together.
'use strict';
const { Worker, isMainThread, workerData } = require('worker_threads');
const { spawn, spawnSync } = require('child_process');

const ARGS = process.argv.slice(2, -1); // the last word is the runner's marker
const MARKER = process.argv[process.argv.length - 1];
const BOUND_MS = 10000;
const START = Date.now();

function say(line) {
  process.stdout.write(line + '\n');
}

function spin(label, report) {
  let last = 0;
  for (;;) {
    const elapsed = Date.now() - START;
    if (elapsed >= BOUND_MS) break;
    if (report && Math.floor(elapsed / 1000) > last) {
      last = Math.floor(elapsed / 1000);
      say(`ELAPSED ${last}`);
    }
  }
  say(`${label} DONE after ${((Date.now() - START) / 1000).toFixed(1)}s`);
}

const SHARE_MS = 3000;
const CHILDREN = 8;
const CHILD_CPU_US = 600000;
const SPINNERS = 2;

const modes = {
  share() {
    const cpuBefore = process.cpuUsage();
    let running = SPINNERS;
    for (let i = 0; i < SPINNERS; i++) {
      const worker = new Worker(__filename, { workerData: { until: START + SHARE_MS } });
      worker.on('exit', () => {
        running -= 1;
        if (running > 0) return;
        const used = process.cpuUsage(cpuBefore);
        const cpuMs = (used.user + used.system) / 1000;
        const wallMs = Date.now() - START;
        say(`CPU ${(cpuMs / 1000).toFixed(2)}s in ${(wallMs / 1000).toFixed(2)}s of wall time`);
        say(`CPU_SHARE_PERMILLE ${Math.floor((cpuMs * 1000) / wallMs)}`);
      });
    }
  },
  while_true() {
    spin('LOOP', true);
  },
  busy_threads() {
    for (let i = 0; i < 4; i++) {
      new Worker(__filename, { workerData: { start: START, label: `THREAD ${i}` } });
    }
    spin('LOOP', true);
    process.exit(0);
  },
  cpu_in_children() {
    const child = `const s = process.cpuUsage();
      for (;;) { const u = process.cpuUsage(s); if (u.user + u.system >= ${CHILD_CPU_US}) break; }`;
    for (let i = 0; i < CHILDREN; i++) {
      spawnSync(process.execPath, ['-e', child, MARKER], { stdio: 'ignore' });
      say(`CHILD ${i} DONE`);
    }
    say(`LOOP DONE after ${((Date.now() - START) / 1000).toFixed(1)}s`);
  },
  regex() {
    // (a+)+$ backtracks exponentially on a run of a's that does not end the string: each extra
    // character doubles the time. Grow n while the next match still fits in the bound.
    const pattern = /^(a+)+$/;
    let n = 14;
    while (Date.now() - START < BOUND_MS) {
      const t0 = Date.now();
      pattern.test('a'.repeat(n) + '!');
      const dt = Date.now() - t0;
      say(`REGEX n=${n} took ${dt}ms`);
      const left = BOUND_MS - (Date.now() - START);
      if (2.5 * dt < left) n++;
      else if (dt > left && n > 14) n--;
    }
    say(`REGEX DONE after ${((Date.now() - START) / 1000).toFixed(1)}s`);
  },
  ignore_sigterm() {
    for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGXCPU']) {
      process.on(sig, () => say(`IGNORED ${sig}`));
    }
    // Handlers run between turns of the event loop, so spin in slices.
    let last = 0;
    const slice = () => {
      const stop = Date.now() + 100;
      while (Date.now() < stop) {}
      const elapsed = Date.now() - START;
      if (Math.floor(elapsed / 1000) > last) {
        last = Math.floor(elapsed / 1000);
        say(`ELAPSED ${last}`);
      }
      if (elapsed < BOUND_MS) setImmediate(slice);
      else say(`LOOP DONE after ${(elapsed / 1000).toFixed(1)}s`);
    };
    slice();
  },
  sigstop() {
    // A stopped process uses no CPU and may be missed by a timeout that counts CPU. A child
    // resumes us after the bound, so the payload still ends by itself; it carries the marker.
    const child = spawn('/bin/sh', ['-c', `sleep ${BOUND_MS / 1000}; kill -CONT ${process.pid}`,
      MARKER], { stdio: 'ignore' });
    child.on('spawn', () => {
      say('STOPPING myself');
      process.kill(process.pid, 'SIGSTOP');
      say(`RESUMED after ${((Date.now() - START) / 1000).toFixed(1)}s`);
    });
    child.on('error', (e) => say(`could not spawn the waker: ${e.message}`));
  },
};

if (isMainThread) {
  modes[ARGS[0]]();
} else if (workerData.until) {
  while (Date.now() < workerData.until);
} else {
  spin(workerData.label, false);
}
