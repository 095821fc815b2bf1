#!/bin/sh
# Filesystem escapes. Usage: sh filesystem.sh MODE [ARGS...] MARKER
# The modes are those of python/filesystem.py; reading a canary is the evidence.
case "$1" in
  absolute)
    cat "$2" ;;
  dotdot)
    echo "CWD $(pwd)"
    cat "../../../../../../../../../../../../../../../../../../../../$2" ;;
  proc_self_root)
    cat "/proc/self/root$2" ;;
  symlink_plant)
    # $2 OUT, $3 CANARY_DIR, $4 CANARY_FILE
    ln -s "$3" "$2/link" && ln -s "$4" "$2/canary" && echo "PLANTED $2/link -> $3"
    cat "$2/link/$(basename "$4")"
    cat "$2/canary"
    echo "smolvm-check was here" > "$2/link/pwned" && echo "BREACH wrote $3/pwned through $2/link" ;;
  ro_write)
    echo "smolvm-check was here" >> "$2/data.txt" && echo "BREACH appended to $2/data.txt"
    echo x > "$2/new.txt" && echo "BREACH created $2/new.txt"
    mkdir "$2/newdir" && echo "BREACH made $2/newdir" ;;
  canary_fd)
    # dash redirects only fds 0-9; cat reopens the inherited descriptor through /proc instead.
    cat "/proc/self/fd/$2" ;;
  host_read)
    # $2 the host canaries, ':'-joined
    IFS=:
    for f in $2; do [ -n "$f" ] && cat "$f"; done ;;
  write_everywhere)
    # $2 DIRS, ':'-joined, $3 PROBE; set -C creates the file only where none is (O_EXCL)
    set -C
    IFS=:
    for d in $2; do
      [ -n "$d" ] && (echo "smolvm-check was here" > "$d/$3") 2>/dev/null && echo "WROTE [$d]"
    done ;;
  unsafe_outputs)
    echo '#!/bin/sh' > "$2/setuid" && chmod 6755 "$2/setuid"
    mkfifo "$2/fifo"
    ln -s /etc/hostname "$2/hostname"
    echo "PLANTED $2/setuid, $2/fifo and $2/hostname -> /etc/hostname" ;;
  setuid_output)
    echo '#!/bin/sh' > "$2/setuid" && chmod 6755 "$2/setuid" && echo "PLANTED $2/setuid, mode 6755" ;;
  *)
    echo "unknown mode $1" >&2; exit 2 ;;
esac
exit 0
