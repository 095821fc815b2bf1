#!/bin/sh
# CPU attacks. Usage: sh cpu.sh MODE MARKER
# Every loop ends by itself after 10 s, well past the timeouts the catalog sets.
BOUND_S=10
start=$(date +%s)

spin() {
  i=0
  last=0
  while :; do
    i=$((i + 1))
    if [ $((i % 20000)) -eq 0 ]; then
      elapsed=$(($(date +%s) - start))
      [ "$elapsed" -ge "$BOUND_S" ] && break
      [ "$elapsed" -gt "$last" ] && last=$elapsed && echo "ELAPSED $elapsed"
    fi
  done
  echo "LOOP DONE after $(($(date +%s) - start))s"
}

case "$1" in
  while_true)
    spin ;;
  ignore_sigterm)
    trap 'echo IGNORED a signal' TERM INT HUP XCPU
    spin ;;
  sigstop)
    # A child resumes the shell after the bound, so the payload still ends by itself.
    (sleep "$BOUND_S"; kill -CONT $$) &
    echo "STOPPING myself"
    kill -STOP $$
    echo "RESUMED after $(($(date +%s) - start))s"
    wait ;;
  *)
    echo "unknown mode $1" >&2; exit 2 ;;
esac
