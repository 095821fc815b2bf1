// Information leaks. Usage: node info.js MODE [ARGS...] MARKER
//
// The modes and their rules are those of python/info.py: env, processes HOST_PID,
// hostname HOST_PID, interfaces, mounts CANARY_DIR, identity HOSTNAME, and ipc KEY (which
// lists /proc/sysvipc/shm; Node cannot attach a segment).
'use strict';
const fs = require('fs');
const os = require('os');

const ARGS = process.argv.slice(2, -1); // the last word is the runner's marker
const MAX_PROCESSES = 16;
const HOST_ONLY_MOUNT_POINTS = ['/sys', '/run', '/boot', '/home', '/root', '/var', '/mnt',
  '/media', '/srv', '/snap', '/opt'];

function say(line) {
  process.stdout.write(line + '\n');
}

const modes = {
  env() {
    for (const key of Object.keys(process.env).sort()) say(`${key}=${process.env[key]}`);
  },
  processes(hostPid) {
    const pids = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map(Number).sort((a, b) => a - b);
    say(`PROCESSES ${pids.length}: ${pids.slice(0, 40).join(' ')}`);
    if (pids.length > MAX_PROCESSES) say(`BREACH /proc shows ${pids.length} processes`);
    if (pids.includes(Number(hostPid))) {
      let cmdline = '?';
      try {
        cmdline = fs.readFileSync(`/proc/${hostPid}/cmdline`).toString().replace(/\0/g, ' ');
      } catch (e) {
        // still visible
      }
      say(`BREACH host process ${hostPid} is visible: ${cmdline}`);
    }
  },
  hostname(hostPid) {
    say(`HOSTNAME ${os.hostname()}`);
    let mine;
    let hosts;
    try {
      mine = fs.readlinkSync('/proc/self/ns/uts');
      hosts = fs.readlinkSync(`/proc/${hostPid}/ns/uts`);
    } catch (e) {
      say(`HOST UTS NAMESPACE NOT VISIBLE: ${e.message}`);
      return;
    }
    if (mine === hosts) {
      say(`BREACH same UTS namespace as host process ${hostPid} (${mine}): the hostname ${os.hostname()} is the host's`);
    } else {
      say(`OWN UTS NAMESPACE ${mine}, host's ${hosts}`);
    }
  },
  interfaces() {
    const names = fs.readFileSync('/proc/net/dev', 'utf8').split('\n').slice(2)
      .filter((l) => l.includes(':')).map((l) => l.split(':')[0].trim());
    say(`INTERFACES ${names.join(' ')}`);
    const others = names.filter((n) => n !== 'lo');
    if (others.length) say(`BREACH host interfaces visible: ${others.join(' ')}`);
  },
  mounts(canaryDir) {
    const lines = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter(Boolean);
    say(`MOUNTS ${lines.length}`);
    for (const line of lines) {
      const fields = line.split(' ');
      const root = fields[3];
      const point = fields[4];
      const hostPoint = HOST_ONLY_MOUNT_POINTS.some((p) => point === p || point.startsWith(p + '/'));
      if (hostPoint || line.includes(canaryDir)) say(`BREACH host mount visible: ${root} on ${point}`);
    }
  },
  identity(hostHostname) {
    const readText = (file) => {
      try {
        return fs.readFileSync(file, 'utf8').slice(0, 256).trim();
      } catch (e) {
        return `unreadable (${e.code})`;
      }
    };
    for (const file of ['/etc/machine-id', '/var/lib/dbus/machine-id']) say(`MACHINE-ID ${file}: ${readText(file)}`);
    const names = { gethostname: os.hostname(), '/etc/hostname': readText('/etc/hostname') };
    for (const [source, name] of Object.entries(names)) {
      say(`HOSTNAME ${source}: ${name}`);
      if (name === hostHostname) say(`BREACH ${source} is the host's hostname ${hostHostname}`);
    }
  },
  ipc(key) {
    const rows = fs.readFileSync('/proc/sysvipc/shm', 'utf8').split('\n').slice(1).filter(Boolean)
      .map((line) => line.trim().split(/\s+/));
    say(`SHM SEGMENTS ${rows.length}`);
    const listed = rows.find((row) => row[0] === key);
    if (listed) say(`BREACH the host's shared memory segment ${key} is listed: ${listed.slice(0, 6).join(' ')}`);
  },
};

modes[ARGS[0]](...ARGS.slice(1));
