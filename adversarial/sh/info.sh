#!/bin/sh
# Information leaks. Usage: sh info.sh MODE [ARGS...] MARKER
# The modes and rules are those of python/info.py.
case "$1" in
  env)
    env ;;
  processes)
    n=$(ls /proc | grep -c '^[0-9][0-9]*$')
    echo "PROCESSES $n"
    [ "$n" -gt 16 ] && echo "BREACH /proc shows $n processes"
    [ -d "/proc/$2" ] && echo "BREACH host process $2 is visible" ;;
  interfaces)
    names=$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')
    echo "INTERFACES $names"
    for n in $names; do
      [ "$n" != lo ] && echo "BREACH host interface visible: $n"
    done ;;
  identity)
    echo "MACHINE-ID /etc/machine-id: $(cat /etc/machine-id 2>&1)"
    for name in "$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname)" "$(cat /etc/hostname 2>/dev/null)"; do
      echo "HOSTNAME $name"
      [ "$name" = "$2" ] && echo "BREACH $name is the host's hostname"
    done ;;
  ipc)
    echo "SHM SEGMENTS $(tail -n +2 /proc/sysvipc/shm | wc -l)"
    tail -n +2 /proc/sysvipc/shm | while read -r key rest; do
      [ "$key" = "$2" ] && echo "BREACH the host's shared memory segment $2 is listed"
    done ;;
  *)
    echo "unknown mode $1" >&2; exit 2 ;;
esac
exit 0
