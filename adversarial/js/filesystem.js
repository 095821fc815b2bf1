// Filesystem escapes. Usage: node filesystem.js MODE [ARGS...] MARKER
//
// Reading a canary is the evidence: the runner finds its token in the output. Writes that
// should be impossible print BREACH. The modes are those of python/filesystem.py, without
// open_by_handle (Node cannot make that syscall) and unsafe_outputs (nor mkfifo).
'use strict';
const fs = require('fs');
const path = require('path');

const ARGS = process.argv.slice(2, -1); // the last word is the runner's marker

function say(line) {
  process.stdout.write(line + '\n');
}

function readFile(file, label = file) {
  let data;
  try {
    data = fs.readFileSync(file).subarray(0, 4096).toString();
  } catch (e) {
    say(`BLOCKED read ${label}: ${e.message}`);
    return null;
  }
  say(`READ ${label}: ${data.trim()}`);
  return data;
}

function writeFile(file, label) {
  try {
    fs.writeFileSync(file, 'smolvm-check was here\n');
  } catch (e) {
    say(`BLOCKED write ${label}: ${e.message}`);
    return false;
  }
  say(`BREACH wrote ${label}`);
  return true;
}

const modes = {
  absolute(canary) {
    readFile(canary);
  },
  dotdot(canary) {
    say(`CWD ${process.cwd()}`);
    readFile('../'.repeat(40) + canary.replace(/^\/+/, ''));
  },
  proc_self_root(canary) {
    readFile('/proc/self/root' + canary);
  },
  proc_1_root(canary, hostPid) {
    // Some hosts' PID 1 refuses /proc/1/root even to root: a host process of the runner's does not.
    readFile('/proc/1/root' + canary);
    readFile(`/proc/${hostPid}/root` + canary);
  },
  proc_scan(canary) {
    const name = path.basename(canary);
    const pids = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map(Number).sort((a, b) => a - b);
    say(`SCANNING ${pids.length} pids`);
    for (const pid of pids) {
      for (const file of [`/proc/${pid}/root${canary}`, `/proc/${pid}/cwd/${name}`]) {
        try {
          say(`READ ${file}: ${fs.readFileSync(file).subarray(0, 4096).toString().trim()}`);
          return;
        } catch (e) {
          // not this one
        }
      }
    }
    say('NOTHING FOUND');
  },
  symlink_plant(out, canaryDir, canary) {
    const link = path.join(out, 'link');
    const fileLink = path.join(out, 'canary');
    fs.symlinkSync(canaryDir, link);
    fs.symlinkSync(canary, fileLink);
    say(`PLANTED ${link} -> ${canaryDir} and ${fileLink} -> ${canary}`);
    readFile(path.join(link, path.basename(canary)), 'through the directory link');
    readFile(fileLink, 'through the file link');
    writeFile(path.join(link, 'pwned'), `${canaryDir}/pwned through ${link}`);
  },
  symlink_swap(out, canaryDir) {
    const sub = path.join(out, 'sub');
    try {
      fs.rmSync(sub, { recursive: true });
    } catch (e) {
      say(`could not remove ${sub}: ${e.message}`);
    }
    fs.symlinkSync(canaryDir, sub);
    say(`SWAPPED ${sub} -> ${canaryDir}`);
    writeFile(path.join(sub, 'pwned'), `${canaryDir}/pwned through ${sub}`);
  },
  symlink_up(out, canary) {
    const up = path.join(out, 'up');
    fs.symlinkSync('../'.repeat(40), up);
    readFile(up + canary);
  },
  hardlink(out, canary) {
    const target = path.join(out, 'hard');
    try {
      fs.linkSync(canary, target);
    } catch (e) {
      say(`BLOCKED link ${canary}: ${e.message}`);
      return;
    }
    say(`BREACH hardlinked ${canary} into ${out}`);
    readFile(target);
  },
  ro_write(mount) {
    const data = path.join(mount, 'data.txt');
    const attempts = [
      ['append to data.txt', () => fs.appendFileSync(data, 'smolvm-check was here\n')],
      ['create new.txt', () => fs.writeFileSync(path.join(mount, 'new.txt'), 'x\n')],
      ['chmod data.txt', () => fs.chmodSync(data, 0o777)],
      ['rename data.txt', () => fs.renameSync(data, data + '.moved')],
      ['mkdir', () => fs.mkdirSync(path.join(mount, 'newdir'))],
    ];
    for (const [label, attempt] of attempts) {
      try {
        attempt();
      } catch (e) {
        say(`BLOCKED ${label}: ${e.message}`);
        continue;
      }
      say(`BREACH ${label} in the read-only mount ${mount}`);
    }
  },
  canary_fd(number) {
    const fd = Number(number);
    const buf = Buffer.alloc(4096);
    let n;
    try {
      n = fs.readSync(fd, buf, 0, buf.length, 0);
    } catch (e) {
      try {
        n = fs.readSync(fd, buf, 0, buf.length, null);
      } catch (e2) {
        say(`BLOCKED fd ${fd}: ${e2.message}`);
        return;
      }
    }
    say(`READ fd ${fd}: ${buf.subarray(0, n).toString().trim()}`);
  },
  host_read(files) {
    for (const file of files.split(':').filter(Boolean)) readFile(file);
  },
  host_walk(prefix) {
    const budget = 50000; // entries looked at; the host canaries sit two or three levels down
    const queue = ['/'];
    let seen = 0;
    let found = 0;
    while (queue.length > 0 && seen < budget) {
      const dir = queue.shift();
      let entries;
      try {
        entries = fs.readdirSync(dir, { withFileTypes: true });
      } catch (e) {
        continue;
      }
      for (const entry of entries) {
        seen += 1;
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) {
          if (full !== '/proc' && full !== '/sys') queue.push(full);
        } else if (entry.isFile() && entry.name.startsWith(prefix)) {
          found += 1;
          readFile(full);
        }
      }
    }
    say(`WALKED ${seen} entries, found ${found}`);
  },
  write_everywhere(dirs, probe) {
    const flags = fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW;
    for (const dir of dirs.split(':').filter(Boolean)) {
      const file = path.join(dir, probe);
      let fd;
      try {
        fd = fs.openSync(file, flags, 0o644);
      } catch (e) {
        say(`BLOCKED create ${file}: ${e.code}`);
        continue;
      }
      fs.writeSync(fd, 'smolvm-check was here\n');
      fs.closeSync(fd);
      say(`WROTE [${dir}]`);
    }
  },
};

modes[ARGS[0]](...ARGS.slice(1));
