#!/bin/sh
# Fill a directory. Usage: sh disk.sh fill DIR MARKER
# Writes DIR/smolvm-check-fill-<pid> up to 512 MiB, 8 MiB at a time (`WROTE <MiB> MiB`), then
# deletes it, whatever happened.
file="$2/smolvm-check-fill-$$"
trap 'rm -f "$file"' EXIT
: > "$file" || exit 1
n=0
while [ "$n" -lt 512 ]; do
  head -c 8388608 /dev/zero >> "$file" || { echo "WRITE STOPPED at $n MiB"; exit 0; }
  n=$((n + 8))
  echo "WROTE $n MiB"
done
echo "BREACH wrote $n MiB into $2"
