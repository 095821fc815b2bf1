// Ordinary work that a sandbox must let run. Usage: node functional.js MODE [ARGS...] MARKER
'use strict';
const fs = require('fs');
const path = require('path');

const ARGS = process.argv.slice(2, -1); // the last word is the runner's marker
const MIB = 1 << 20;

function say(line) {
  process.stdout.write(line + '\n');
}

const modes = {
  hello() {
    say('hello from node');
  },
  stdin_echo() {
    const data = fs.readFileSync(0, 'utf8');
    process.stdout.write(data);
    say(`ECHOED ${data.split('\n').filter((l, i, a) => l !== '' || i < a.length - 1).length} lines`);
  },
  json_to_tsv(inDir, outDir) {
    const items = JSON.parse(fs.readFileSync(path.join(inDir, 'items.json'), 'utf8'));
    const lines = ['id\tname\ttags', ...items.map((i) => `${i.id}\t${i.name}\t${i.tags.join(',')}`)];
    fs.writeFileSync(path.join(outDir, 'items.tsv'), lines.join('\n') + '\n');
    say(`CONVERTED ${items.length} items`);
  },
  unicode() {
    say('UNICODE héllo wörld — ½ € 日本語 Ελληνικά 🙂');
  },
  exit_code() {
    say('EXITING 3');
    process.exitCode = 3;
  },
  memory(mib) {
    const held = Buffer.alloc(Number(mib) * MIB, 0x5a);
    say(`ALLOCATED ${held.length / MIB} MiB OK`);
  },
  many_files(dir, count) {
    const base = path.join(dir, 'many');
    const n = Number(count);
    fs.mkdirSync(base);
    for (let i = 0; i < n; i++) fs.writeFileSync(path.join(base, `f${i}.txt`), `${i}\n`);
    let ok = true;
    for (let i = 0; i < n; i++) ok = ok && fs.readFileSync(path.join(base, `f${i}.txt`), 'utf8') === `${i}\n`;
    fs.rmSync(base, { recursive: true });
    say(`FILES ${n} ${ok ? 'OK' : 'MISMATCH'}`);
  },
  env(name) {
    say(`${name}=${process.env[name] ?? '<unset>'}`);
  },
  workdir(expected) {
    const cwd = fs.realpathSync(process.cwd());
    say(`WORKDIR ${cwd === fs.realpathSync(expected) ? 'OK' : 'MISMATCH'} ${cwd}`);
  },
};

modes[ARGS[0]](...ARGS.slice(1));
