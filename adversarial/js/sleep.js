// Sleeps past the timeout. Usage: node sleep.js SECONDS MARKER
//
// A sleeping process uses no CPU: only a wall-clock timeout ends it.
'use strict';
const ARGS = process.argv.slice(2, -1); // the last word is the runner's marker
setTimeout(() => process.stdout.write(`SLEPT ${ARGS[0]}s\n`), Number(ARGS[0]) * 1000);
