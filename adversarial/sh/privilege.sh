#!/bin/sh
# Capabilities. Usage: sh privilege.sh capabilities MARKER
# BREACH if the effective capability set is not empty.
eff=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)
echo "CapEff $eff"
[ "$eff" != "0000000000000000" ] && echo "BREACH effective capabilities $eff"
exit 0
