#!/bin/sh
# Sleeps past the timeout. Usage: sh sleep.sh SECONDS MARKER
sleep "$1"
echo "SLEPT $1s"
