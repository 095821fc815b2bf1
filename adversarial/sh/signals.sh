#!/bin/sh
# Signals and lifetime. Usage: sh signals.sh MODE [ARGS...] MARKER
# daemon OUT: a double-forked shell in its own session, the marker in its argv, that sleeps
#             3 s, writes OUT/late.txt and exits.
# sigurg:     kill(-1, SIGURG); ignored by default, detected by the runner's host process.
case "$1" in
  daemon)
    marker=$3
    (setsid /bin/sh -c 'sleep 3; echo "written by a daemon after the run" > "$1/late.txt"' \
      "$marker" "$2" </dev/null >/dev/null 2>&1 &)
    echo "DAEMON STARTED" ;;
  sigurg)
    kill -s URG -- -1 && echo "SENT SIGURG to every process allowed" ;;
  *)
    echo "unknown mode $1" >&2; exit 2 ;;
esac
exit 0
