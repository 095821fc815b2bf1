// The workload of the egress tests: one Python program that tries what a workload would, one
// step per argument group, and prints one line per step. Harmless without any sandbox: every
// address it is given is a test host in the test internet's namespaces.
//
//   fetch HOST PORT HOST_HEADER [SNI]  HTTP GET /, over TLS (unverified) when SNI is given
//   resolve NAME                       the addresses, or the resolver's error
//   connect HOST PORT                  "connected" and what the server sent, or the errno
//   udp HOST PORT                      "sent", or the errno
//   dns SERVER NAME TYPE               a query sent by hand to SERVER:53: the rcode or the errno
//   hold HOST PORT N                   N connections at once, each sending half a request:
//                                      how many are still open after a moment
//   post HOST PORT SIZE                a POST of SIZE bytes: the status, or the errno
//   listeners                          connects straight to every TCP socket listening on
//                                      loopback that /proc/net/tcp{,6} shows (the gateway's
//                                      own, on either backend): how many, and each outcome
// Steps are separated by "/", e.g. `resolve other.test / connect 192.0.2.20 80`.
#pragma once

namespace smolbox::testing {

inline constexpr const char* kEgressProbe = R"py(
import errno, http.client, random, socket, ssl, struct, sys, time

def error(e):
    if isinstance(e, socket.gaierror):
        return "gaierror " + str(e.errno)
    if isinstance(e, OSError) and e.errno in errno.errorcode:
        return errno.errorcode[e.errno]
    return type(e).__name__

def fetch(host, port, header, sni=None):
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    if sni is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        c.sock = context.wrap_socket(socket.create_connection((host, int(port)), timeout=10), server_hostname=sni)
    c.request("GET", "/", headers={"Host": header})
    r = c.getresponse()
    return "%d %s" % (r.status, r.read().decode())

def resolve(name):
    return " ".join(sorted({a[4][0] for a in socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)}))

def connect(host, port):
    s = socket.create_connection((host, int(port)), timeout=10)
    s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
    data = b""
    while chunk := s.recv(4096):  # HTTP/1.0: the server closes after its reply
        data += chunk
    return "connected " + (data.split(b"\r\n\r\n", 1)[-1].decode() if data else "but closed")

def udp(host, port):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"ping", (host, int(port)))
    s.settimeout(2)
    return "sent, and " + ("echoed" if s.recv(16) else "nothing")

def dns(server, name, qtype):
    types = {"A": 1, "TXT": 16, "AAAA": 28}
    q = struct.pack("!HHHHHH", random.randrange(65536), 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    q += struct.pack("!HH", types[qtype], 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(q, (server, 53))
    reply = s.recv(4096)
    rcode = reply[3] & 15
    return {0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED"}.get(rcode, str(rcode)) + " answers=%d" % struct.unpack("!H", reply[6:8])

def hold(host, port, n):
    held = []
    for _ in range(int(n)):
        # A connection past the cap may be reset before or after its bytes go: either way it
        # is not held.
        try:
            s = socket.create_connection((host, int(port)), timeout=10)
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
            held.append(s)
        except OSError:
            pass
    time.sleep(1)
    alive = 0
    for s in held:
        s.setblocking(False)
        try:
            alive += s.recv(1) == b"" and 0 or 1
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
    return "held %d of %s" % (alive, n)

def post(host, port, size):
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    c.request("POST", "/", body=b"x" * int(size), headers={"Host": "x"})
    return str(c.getresponse().status)

def listeners():
    found = []
    for path, family, loopback in (("/proc/net/tcp", socket.AF_INET, "0100007F"),
                                   ("/proc/net/tcp6", socket.AF_INET6, "00000000000000000000000001000000")):
        try:
            lines = open(path).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, port = local.split(":")
            if state == "0A" and address == loopback:  # LISTEN
                found.append((family, "127.0.0.1" if family == socket.AF_INET else "::1", int(port, 16)))
    outcomes = []
    for family, host, port in found:
        try:
            outcomes.append(connect(host, port))
        except Exception as e:
            outcomes.append(error(e))
    return "%d: %s" % (len(found), " ".join(sorted(outcomes)))

steps = " ".join(sys.argv[1:]).split(" / ")
for step in steps:
    op, *args = step.split()
    try:
        print(globals()[op](*args))
    except Exception as e:
        print(error(e))
    sys.stdout.flush()
)py";

}  // namespace smolbox::testing
