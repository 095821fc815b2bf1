"""The servers of the test internet (conformance/src/battery/test_internet.h), and the DNS
client its users query with.

Run by TestInternet inside a network namespace, one process per namespace:

  servers.py serve --state DIR --http 192.0.2.10:80 --http [2001:db8::10]:80 \
      --tls 192.0.2.10:443 --udp-echo 192.0.2.10:9999 --answer 127.0.0.1:80=host-loopback

It prints "ready" once every socket is bound, then serves until killed. The addresses come from
TestInternet, so that the topology is written down in one place only (test_internet.cc).
GET /files/PATH answers the file DIR/files/PATH (PATH/index.html for a directory) that a test put
there: a package registry's documents, say.

  servers.py query 203.0.113.53 api.allowed.test A   ->  NOERROR 192.0.2.10
  servers.py query 203.0.113.53 nope.test A          ->  NXDOMAIN
  (from a namespace with no route)                                   ->  error ENETUNREACH, exit 1

Stdlib only: it runs under the distribution's /usr/bin/python3, with no packages of its own.
"""

import argparse
import errno
import http.server
import ipaddress
import os
import random
import socket
import socketserver
import ssl
import struct
import sys
import threading

# The largest /bytes/N: 1 GiB is the throughput benches' biggest transfer.
MAX_BYTES = 1 << 30
CHUNK = b"x" * (1 << 16)


def log(*words):
    print(*words, file=sys.stderr, flush=True)


def split_endpoint(text):
    """'192.0.2.10:80' or '[2001:db8::10]:80' -> (address, port)."""
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


class Handler(http.server.BaseHTTPRequestHandler):
    """Answers every method: a gateway test may send any, and must see who answered."""

    protocol_version = "HTTP/1.1"

    def __getattr__(self, name):
        if name.startswith("do_"):
            return self.answer
        raise AttributeError(name)

    def answer(self):
        # The request's own body is read first, or it would be taken for the next request.
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.server.fixed_body is not None:
            return self.send_body(self.server.fixed_body.encode())
        if self.command == "GET" and self.path.startswith("/bytes/"):
            return self.send_bytes(self.path[len("/bytes/"):])
        if self.command in ("GET", "HEAD") and self.path.startswith("/files/"):
            return self.send_file(self.path[len("/files/"):])
        words = ["server=" + self.connection.getsockname()[0]]
        if isinstance(self.connection, ssl.SSLSocket):
            words.append("sni=" + (getattr(self.connection, "sni_name", None) or "none"))
        words.append("host=" + (self.headers.get("Host") or "none"))
        self.send_body(" ".join(words).encode())

    def send_body(self, body, status=200):
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_file(self, relative):
        """A file the test put below the state's files/: no "..", and not a link itself."""
        relative = relative.split("?", 1)[0].split("#", 1)[0]
        parts = [p for p in relative.split("/") if p]
        if any(p in (".", "..") for p in parts):
            return self.send_body(b"no such file\n", status=404)
        path = os.path.join(self.server.files_dir, *parts)
        if os.path.isdir(path):
            path = os.path.join(path, "index.html")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return self.send_body(b"no such file\n", status=404)
        with os.fdopen(fd, "rb") as f:
            body = f.read()
        kind = {".html": "text/html", ".tgz": "application/octet-stream", ".whl": "application/octet-stream"}
        content_type = "application/json" if body.startswith(b"{") else kind.get(os.path.splitext(path)[1], "text/plain")
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_bytes(self, count_text):
        if not count_text.isdigit() or int(count_text) > MAX_BYTES:
            return self.send_body(b"N must be 0 to 1 GiB\n", status=400)
        left = int(count_text)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(left))
        self.end_headers()
        # Streamed: a 1 GiB body must not be built in memory.
        view = memoryview(CHUNK)
        while left > 0:
            piece = view[: min(left, len(CHUNK))]
            self.wfile.write(piece)
            left -= len(piece)

    def log_message(self, format, *args):
        log("%s %s" % (self.connection.getsockname()[0], format % args))


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # The egress battery opens a hundred connections at once: none may wait on a full backlog.
    request_queue_size = 128
    allow_reuse_address = True
    fixed_body = None
    files_dir = "/nonexistent"  # serve() names the state's files/

    def __init__(self, endpoint):
        self.address_family = socket.AF_INET6 if ":" in endpoint[0] else socket.AF_INET
        super().__init__(endpoint, Handler)

    def server_bind(self):
        # Not HTTPServer's own: it looks its address up with getfqdn, a query to the host's DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


class TlsServer(Server):
    """TLS is set up in the connection's own thread: a client that never finishes its
    handshake must not hold up the accept loop."""

    def __init__(self, endpoint, context):
        super().__init__(endpoint)
        self.context = context

    def finish_request(self, request, client_address):
        # A deadline for the handshake only; afterwards no timeout, as over plain HTTP.
        request.settimeout(30)
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as e:
            peer = client_address[0]
            log("%s tls handshake from %s failed: %s" % (self.server_address[0], peer, e))
            return
        tls.settimeout(None)
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            tls.close()


def tls_context(state_dir):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(os.path.join(state_dir, "cert.pem"), os.path.join(state_dir, "key.pem"))

    # The name the client asked for, kept on its connection for the handler to report.
    def record_sni(connection, name, _context):
        connection.sni_name = name

    context.sni_callback = record_sni
    return context


def udp_echo(endpoint):
    family = socket.AF_INET6 if ":" in endpoint[0] else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.bind(endpoint)

    def loop():
        while True:
            data, peer = sock.recvfrom(65535)
            log("%s udp echo of %d bytes to %s" % (endpoint[0], len(data), peer[0]))
            sock.sendto(data, peer)

    return loop


def serve(args):
    loops = []
    for text in args.http:
        loops.append(Server(split_endpoint(text)).serve_forever)
    if args.tls:
        context = tls_context(args.state)
        for text in args.tls:
            loops.append(TlsServer(split_endpoint(text), context).serve_forever)
    for text in args.udp_echo:
        loops.append(udp_echo(split_endpoint(text)))
    for text in args.answer:
        endpoint, _, body = text.partition("=")
        server = Server(split_endpoint(endpoint))
        server.fixed_body = body
        loops.append(server.serve_forever)
    Server.files_dir = os.path.join(args.state, "files")
    for loop in loops:
        threading.Thread(target=loop, daemon=True).start()
    # Every socket is bound and listening: a client may connect from now on.
    log("ready")
    threading.Event().wait()


# ---------------------------------------------------------------------------
# The DNS client: one question over UDP, built and read by hand (RFC 1035).

TYPES = {"A": 1, "AAAA": 28, "TXT": 16}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}


def encode_name(name):
    return b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"


def skip_name(message, offset):
    while True:
        length = message[offset]
        if length == 0:
            return offset + 1
        if length & 0xC0 == 0xC0:  # a compression pointer ends the name
            return offset + 2
        offset += 1 + length


def decode_rdata(rtype, rdata):
    if rtype == TYPES["A"]:
        return str(ipaddress.IPv4Address(rdata))
    if rtype == TYPES["AAAA"]:
        address = ipaddress.IPv6Address(rdata)
        # Spelled as the fixture wrote it, whatever this python's str() makes of a mapped one.
        return "::ffff:%s" % address.ipv4_mapped if address.ipv4_mapped else str(address)
    strings, offset = [], 0
    while offset < len(rdata):
        strings.append(rdata[offset + 1 : offset + 1 + rdata[offset]].decode())
        offset += 1 + rdata[offset]
    return "".join(strings)


def query(args):
    qtype = TYPES[args.type]
    ident = random.getrandbits(16)
    question = encode_name(args.name) + struct.pack("!HH", qtype, 1)
    packet = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question
    family = socket.AF_INET6 if ":" in args.server else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.settimeout(args.timeout)
            # Connected, so that a port nobody listens on is refused at once, not timed out.
            sock.connect((args.server, 53))
            sock.send(packet)
            message = sock.recv(65535)
    except socket.timeout:
        sys.exit("error timeout")
    except OSError as e:
        sys.exit("error " + errno.errorcode.get(e.errno, str(e.errno)))
    got_id, flags, _, answers, _, _ = struct.unpack("!HHHHHH", message[:12])
    if got_id != ident:
        sys.exit("answer to another query")
    words = [RCODES.get(flags & 0xF, "RCODE%d" % (flags & 0xF))]
    ttls = []
    offset = skip_name(message, 12) + 4
    for _ in range(answers):
        offset = skip_name(message, offset)
        rtype, _, ttl, length = struct.unpack("!HHIH", message[offset : offset + 10])
        offset += 10
        # Only the type asked for: a CNAME on the way is not an answer.
        if rtype == qtype:
            words.append(decode_rdata(rtype, message[offset : offset + length]))
            ttls.append(ttl)
        offset += length
    if args.ttl and ttls:
        words.append("ttl=%d" % max(ttls))
    print(" ".join(words))


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    server = commands.add_parser("serve")
    # The fixture's directory: it holds cert.pem and key.pem, and naming it in this process's
    # command line lets a leaked server be traced to its fixture (CountProcessesWith).
    server.add_argument("--state", required=True)
    server.add_argument("--http", action="append", default=[], metavar="ADDR:PORT")
    server.add_argument("--tls", action="append", default=[], metavar="ADDR:PORT")
    server.add_argument("--udp-echo", action="append", default=[], metavar="ADDR:PORT")
    server.add_argument("--answer", action="append", default=[], metavar="ADDR:PORT=TEXT")
    client = commands.add_parser("query")
    client.add_argument("server")
    client.add_argument("name")
    client.add_argument("type", choices=sorted(TYPES))
    client.add_argument("--timeout", type=float, default=2.0)
    client.add_argument("--ttl", action="store_true", help="add ttl=N, the longest of the answers'")
    args = parser.parse_args()
    serve(args) if args.command == "serve" else query(args)


if __name__ == "__main__":
    main()
