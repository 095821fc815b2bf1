"""Network attacks. Usage: network.py MODE [ARGS...] MARKER

tcp HOST PORT      connect, print what the server sends (a canary token) and BREACH
udp HOST PORT      connect a UDP socket and send one datagram: BREACH if it leaves
dns                a resolver is reachable: see resolver() below
raw | packet       BREACH if a raw IPv4 or packet socket can be created (closed at once)
netlink            BREACH if a NETLINK_ROUTE dump shows any interface but lo
unix PATH          connect to a host unix socket by path and print what it sends
abstract NAME      the same for an abstract socket (NAME without the leading NUL)

No traffic goes anywhere but the hosts given in the args, and the resolver for `dns`.
"""
import ipaddress
import os
import socket
import struct
import sys

ARGS = sys.argv[1:-1]  # the last word is the runner's marker


def say(*parts):
    print(*parts, flush=True)


def receive(sock, label):
    sock.settimeout(3)
    data = b""
    try:
        while len(data) < 4096:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    say(f"BREACH connected to {label}; received: {data.decode(errors='replace').strip()}")


def tcp(host, port):
    try:
        sock = socket.create_connection((host, int(port)), timeout=3)
    except OSError as e:
        say(f"BLOCKED tcp {host}:{port}: {e}")
        return
    with sock:
        receive(sock, f"tcp {host}:{port}")


def udp(host, port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.connect((host, int(port)))
            sock.send(b"smolvm-check udp probe\n")
        except OSError as e:
            say(f"BLOCKED udp {host}:{port}: {e}")
            return
        say(f"BREACH udp datagram sent to {host}:{port}")


def nameservers():
    try:
        with open("/etc/resolv.conf") as f:
            lines = f.read().splitlines()
    except OSError as e:
        say(f"NO RESOLVER: {e}")
        return []
    found = []
    for line in lines:
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            found.append(words[1])
    if not found:
        say("NO RESOLVER: /etc/resolv.conf names no nameserver")
    return found


def dns_query(name):
    header = struct.pack("!HHHHHH", 0x5343, 0x0100, 1, 0, 0, 0)  # id, RD, one question
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".") if p) + b"\0"
    return header + labels + struct.pack("!HH", 1, 1)  # A, IN


def resolver():
    # A nameserver on loopback (systemd-resolved's 127.0.0.53) is reachable from any sandbox
    # that keeps a loopback, so there only a reply counts: one query for "localhost", answered
    # locally. Any other nameserver counts as reached when a UDP socket can connect to it:
    # connect() on UDP only looks up a route and sends nothing.
    for server in nameservers():
        try:
            addr = ipaddress.ip_address(server.split("%")[0])
        except ValueError:
            say(f"SKIPPED nameserver {server}")
            continue
        family = socket.AF_INET6 if addr.version == 6 else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            try:
                sock.connect((str(addr), 53))
                if not addr.is_loopback:
                    say(f"BREACH route to nameserver {addr} from /etc/resolv.conf")
                    continue
                sock.settimeout(2)
                sock.send(dns_query("localhost"))
                reply = sock.recv(512)
                say(f"BREACH nameserver {addr} answered ({len(reply)} bytes)")
            except OSError as e:
                say(f"BLOCKED nameserver {addr}: {e}")


def make_socket(label, family, kind, proto):
    try:
        sock = socket.socket(family, kind, proto)
    except OSError as e:
        say(f"BLOCKED {label} socket: {e}")
        return
    sock.close()
    say(f"BREACH created a {label} socket")


def raw():
    make_socket("raw IPv4", socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)


def packet():
    # Protocol 0: the socket receives nothing until bound, and it is closed at once.
    make_socket("packet", socket.AF_PACKET, socket.SOCK_RAW, 0)


def netlink():
    RTM_GETLINK, NLM_F_REQUEST, NLM_F_DUMP, NLMSG_DONE, IFLA_IFNAME = 18, 1, 0x300, 3, 3
    try:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)  # NETLINK_ROUTE
    except OSError as e:
        say(f"BLOCKED netlink socket: {e}")
        return
    names = []
    with sock:
        sock.settimeout(3)
        request = struct.pack("=IHHII", 32, RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, 1, 0)
        sock.send(request + struct.pack("=BxHiII", socket.AF_UNSPEC, 0, 0, 0, 0))
        done = False
        while not done:
            data = sock.recv(65536)
            offset = 0
            while offset + 16 <= len(data):
                length, kind = struct.unpack_from("=IH", data, offset)
                if kind == NLMSG_DONE or length < 16:
                    done = True
                    break
                attr = offset + 16 + 16  # nlmsghdr, ifinfomsg
                while attr + 4 <= offset + length:
                    alen, atype = struct.unpack_from("=HH", data, attr)
                    if alen < 4:
                        break
                    if atype == IFLA_IFNAME:
                        names.append(data[attr + 4:attr + alen].split(b"\0")[0].decode())
                    attr += (alen + 3) & ~3
                offset += (length + 3) & ~3
    say(f"INTERFACES {' '.join(names)}")
    others = [n for n in names if n != "lo"]
    if others:
        say(f"BREACH netlink shows host interfaces: {' '.join(others)}")


def unix(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.settimeout(3)
            sock.connect(path)
        except OSError as e:
            say(f"BLOCKED unix {path}: {e}")
            return
        receive(sock, f"unix {path}")


def abstract(name):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.settimeout(3)
            sock.connect("\0" + name)
        except OSError as e:
            say(f"BLOCKED abstract @{name}: {e}")
            return
        receive(sock, f"abstract @{name}")


MODES = {
    "tcp": tcp, "udp": udp, "dns": resolver, "raw": raw, "packet": packet,
    "netlink": netlink, "unix": unix, "abstract": abstract,
}

if __name__ == "__main__":
    MODES[ARGS[0]](*ARGS[1:])
