#!/bin/sh
# Stdout flood. Usage: sh output.sh stdout MARKER
# 64 MiB of zeros turned into text, then `FLOOD DONE` on stderr: a sandbox that caps output
# ends the run before that line.
head -c 67108864 /dev/zero | tr '\0' 'x'
echo "FLOOD DONE 67108864 bytes on stdout" >&2
