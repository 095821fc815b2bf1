#!/bin/sh
# Ordinary shell work. Usage: sh functional.sh MODE MARKER
case "$1" in
  hello)
    echo "hello from sh" ;;
  pipeline)
    printf 'pear\napple\nfig\n' | sort | tr 'a-z' 'A-Z' | paste -sd, -
    echo "SUM $((6 * 7))"
    tmp=$(mktemp)
    echo "scratch works" > "$tmp" && cat "$tmp" && rm -f "$tmp" ;;
  *)
    echo "unknown mode $1" >&2; exit 2 ;;
esac
