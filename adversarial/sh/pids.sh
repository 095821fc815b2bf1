#!/bin/sh
# Fork bomb. Usage: sh pids.sh fork_bomb MARKER
# Stops at 300 children, each sleeping 2 s; prints `SPAWNED N` as it goes, since a shell that
# cannot fork stops right there.
n=0
while [ "$n" -lt 300 ]; do
  sleep 2 &
  n=$((n + 1))
  [ $((n % 10)) -eq 0 ] && echo "SPAWNED $n"
done
echo "SPAWNED $n"
wait
