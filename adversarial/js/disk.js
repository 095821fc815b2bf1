// Disk attacks. Usage: node disk.js MODE DIR MARKER
//
// fill:    write DIR/smolvm-check-fill-<pid> up to 512 MiB (`WROTE <MiB> MiB`), then delete it.
// inodes:  create up to 20000 empty files in a fresh DIR/smolvm-check-inodes-<pid> (`FILES N`),
//          then delete them.
// sparse:  grow DIR/sparse.bin (planted by the runner) to an apparent size of 1 GiB and leave
//          it: a sandbox must either refuse, or keep it from crossing back to the host (the
//          catalog expects the planted content in the output).
// descriptors:  open /dev/null up to 256 times (`OPENED N`), which the files limit must stop.
'use strict';
const fs = require('fs');
const path = require('path');

const ARGS = process.argv.slice(2, -1); // the last word is the runner's marker
const MIB = 1 << 20;
const FILL_LIMIT_MIB = 512;
const INODE_LIMIT = 20000;
const SPARSE_SIZE = 1 << 30;

function say(line) {
  process.stdout.write(line + '\n');
}

const modes = {
  fill(dir) {
    const file = path.join(dir, `smolvm-check-fill-${process.pid}`);
    const fd = fs.openSync(file, 'wx', 0o600);
    const block = Buffer.alloc(MIB, 0x5a);
    let total = 0;
    try {
      while (total < FILL_LIMIT_MIB) {
        fs.writeSync(fd, block);
        total++;
        if (total % 8 === 0) say(`WROTE ${total} MiB`);
      }
      fs.fsyncSync(fd);
      say(`BREACH wrote ${total} MiB into ${dir}`);
    } catch (e) {
      say(`WROTE ${total} MiB`);
      say(`WRITE STOPPED: ${e.message}`);
    } finally {
      fs.closeSync(fd);
      fs.unlinkSync(file);
    }
  },
  inodes(dir) {
    const base = path.join(dir, `smolvm-check-inodes-${process.pid}`);
    fs.mkdirSync(base);
    let count = 0;
    try {
      while (count < INODE_LIMIT) {
        fs.closeSync(fs.openSync(path.join(base, String(count)), 'w', 0o600));
        count++;
        if (count % 1000 === 0) say(`FILES ${count}`);
      }
      say(`BREACH created ${count} files`);
    } catch (e) {
      say(`FILES ${count}`);
      say(`CREATE STOPPED: ${e.message}`);
    } finally {
      fs.rmSync(base, { recursive: true, force: true });
    }
  },
  sparse(dir) {
    const file = path.join(dir, 'sparse.bin');
    const fd = fs.openSync(file, 'r+');
    try {
      try {
        fs.ftruncateSync(fd, SPARSE_SIZE);
        say(`SPARSE ftruncate to ${SPARSE_SIZE} succeeded`);
      } catch (e) {
        say(`SPARSE ftruncate refused: ${e.message}`);
        try {
          fs.writeSync(fd, Buffer.alloc(1), 0, 1, SPARSE_SIZE - 1);
          say(`SPARSE write at offset ${SPARSE_SIZE - 1} succeeded`);
        } catch (e2) {
          say(`SPARSE write refused: ${e2.message}`);
        }
      }
      const st = fs.fstatSync(fd);
      say(`SPARSE size=${st.size} blocks=${st.blocks}`);
    } finally {
      fs.closeSync(fd);
    }
  },
  descriptors() {
    const opened = [];
    try {
      while (opened.length < 256) opened.push(fs.openSync('/dev/null', 'r'));
    } catch (e) {
      say(`REFUSED after ${opened.length}: ${e.code}`);
    }
    say(`OPENED ${opened.length}`);
    for (const fd of opened) fs.closeSync(fd);
  },
};

modes[ARGS[0]](...ARGS.slice(1));
