# shellcheck shell=bash
# A test internet of network namespaces, for the scripts that fetch through the egress gateway
# (scripts/egress-bench, scripts/soak); sourced, root only. Nothing in it routes off this
# machine:
#   $ti_net     the servers: dnsmasq on 203.0.113.53 (api.allowed.test is 192.0.2.10) and
#               conformance/test_internet/servers.py's HTTP server on 192.0.2.10:80;
#   $ti_up      the uplink, joined to $ti_net by a veth pair: the direct client and the
#               gateway (--egress-netns /run/netns/$ti_up) dial from here;
#   $ti_client  loopback alone: smolbox runs in it (nsenter --net=/run/netns/$ti_client), so
#               that a gateway dialing from the wrong namespace reaches nothing at all.
#
#   source scripts/lib/test-internet.sh
#   test_internet_up "$scratch"     # the servers' state and logs go in this dir
#   trap test_internet_down EXIT
#   ti_egress_flags=(...)           # the smolbox flags that allow api.allowed.test through it

ti_suffix=$$
ti_up=sbx-ti-up-$ti_suffix ti_net=sbx-ti-net-$ti_suffix ti_client=sbx-ti-cl-$ti_suffix
ti_pids=()
# shellcheck disable=SC2034  # for the scripts that source this
ti_egress_flags=(--allow-host api.allowed.test --egress-netns "/run/netns/$ti_up" --dns-server 203.0.113.53)

test_internet_down() {
  local pid ns
  for pid in "${ti_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for ns in "$ti_up" "$ti_net" "$ti_client"; do ip netns del "$ns" 2>/dev/null || true; done
}

# Makes the namespaces and starts the servers; returns once both answer.
test_internet_up() {
  local state=$1 veth_up=ti-up-$ti_suffix veth_net=ti-net-$ti_suffix
  ip netns add "$ti_up"
  ip netns add "$ti_net"
  ip netns add "$ti_client"
  ip -n "$ti_client" link set lo up
  ip link add "${veth_up:0:15}" netns "$ti_up" type veth peer name "${veth_net:0:15}" netns "$ti_net"
  ip -n "$ti_up" addr add 198.18.0.1/30 dev "${veth_up:0:15}"
  ip -n "$ti_net" addr add 198.18.0.2/30 dev "${veth_net:0:15}"
  ip -n "$ti_up" link set lo up
  ip -n "$ti_net" link set lo up
  ip -n "$ti_up" link set "${veth_up:0:15}" up
  ip -n "$ti_net" link set "${veth_net:0:15}" up
  ip -n "$ti_up" route add default via 198.18.0.2
  ip -n "$ti_net" addr add 192.0.2.10/32 dev lo
  ip -n "$ti_net" addr add 203.0.113.53/32 dev lo
  ip netns exec "$ti_net" /usr/sbin/dnsmasq --no-daemon --no-resolv --no-hosts --bind-interfaces \
    --listen-address=203.0.113.53 --host-record=api.allowed.test,192.0.2.10 \
    --pid-file="$state/dnsmasq.pid" >"$state/dnsmasq.log" 2>&1 &
  ti_pids+=($!)
  ip netns exec "$ti_net" /usr/bin/python3 -u conformance/test_internet/servers.py serve \
    --state "$state" --http 192.0.2.10:80 >"$state/http.log" 2>&1 &
  ti_pids+=($!)
  local tries
  for ((tries = 0; tries < 100; tries++)); do
    if grep -q ready "$state/http.log" 2>/dev/null &&
      ip netns exec "$ti_up" /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(0.2)
s.sendto(bytes.fromhex("abcd01000001000000000000") + b"\x03api\x07allowed\x04test\x00\x00\x01\x00\x01", ("203.0.113.53", 53))
sys.exit(0 if s.recv(512)[:2] == bytes.fromhex("abcd") else 1)' 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  echo "test internet: the servers did not come up (logs in $state)" >&2
  return 1
}
