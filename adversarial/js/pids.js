// Thread bomb and spawn loop. Usage: node pids.js MODE MARKER
//
// Each stops at its cap and prints how many it made (`SPAWNED N`). Children sleep briefly and
// exit; spawned shells carry the marker in their argv, so the runner can find any that outlive
// the run. (Node cannot fork(): python/pids.py has the fork bomb.)
'use strict';
const { spawn } = require('child_process');
const { Worker } = require('worker_threads');

const MARKER = process.argv[process.argv.length - 1];
const ARGS = process.argv.slice(2, -1); // the last word is the runner's marker
const CHILD_SLEEP_S = 2;

function say(line) {
  process.stdout.write(line + '\n');
}

const modes = {
  thread_bomb() {
    // Workers are OS threads with an isolate each: up to 120 of them, small heaps, started one
    // at a time and all kept alive until the end, so they pile up however slowly each starts
    // (an emulated VM takes ~0.3 s per isolate).
    const CAP = 120;
    const workers = [];
    const done = (why) => {
      if (why) say(why);
      say(`SPAWNED ${workers.length}`);
      // Exiting ends every worker with the process.
      setTimeout(() => process.exit(0), CHILD_SLEEP_S * 1000);
    };
    const next = () => {
      if (workers.length >= CAP) return done();
      let w;
      try {
        w = new Worker('setInterval(() => {}, 1000)', {
          eval: true,
          resourceLimits: { maxOldGenerationSizeMb: 16, maxYoungGenerationSizeMb: 2, stackSizeMb: 1 },
        });
      } catch (e) {
        return done(`THREAD FAILED after ${workers.length}: ${e.message}`);
      }
      workers.push(w);
      w.on('error', () => {});
      w.once('online', next);
    };
    next();
  },
  spawn_loop() {
    // `sleep; :` keeps sh alive (dash execs a lone last command), so the marker stays visible.
    const CAP = 300;
    const children = [];
    let exited = 0;
    const done = (why) => {
      if (why) say(why);
      say(`SPAWNED ${children.length}`);
      if (exited === children.length) process.exit(0);
    };
    const next = () => {
      if (children.length >= CAP) return done();
      let child;
      try {
        child = spawn('/bin/sh', ['-c', `sleep ${CHILD_SLEEP_S}; :`, MARKER], { stdio: 'ignore' });
      } catch (e) {
        return done(`SPAWN FAILED after ${children.length}: ${e.message}`);
      }
      child.once('spawn', () => {
        children.push(child);
        child.once('exit', () => exited++);
        next();
      });
      child.once('error', (e) => done(`SPAWN FAILED after ${children.length}: ${e.message}`));
    };
    next();
  },
};

modes[ARGS[0]]();
