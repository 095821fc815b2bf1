"""Egress attacks, run on the test internet. Usage: egress.py CONTROL_URL MODE [ARGS...] MARKER

First the control: GET CONTROL_URL, which the case's policy allows, printing "CONTROL ok" when
the test server answers. A sandbox with no network at all cannot pass a case that way. An
https:// control verifies the server's certificate as a client does by default (the system's
trust store, SSL_CERT_FILE): it passes only in a sandbox that trusts the test CA. Then the
attack, which prints BREACH when what the policy forbids got through:

  none                   the control alone (functional cases)
  https URL              a GET of URL, verified by default: "HTTPS verified" or "HTTPS refused"
                         with the reason (functional cases: the CA is trusted or it is not)
  resolve NAME           NAME resolves
  http URL [HOST]        the test server answers URL (with that Host header)
  tls ADDR PORT SNI      a TLS server answers a request made with that SNI
  tls_verified ADDR PORT SNI   the same over a session verified against the trust store, for
                         SNI as its name: real TLS, as a client that checks certificates makes it
  udp ADDR PORT          a UDP echo server echoes a datagram
  txt NAME               the resolver answers a TXT query for NAME
  dns_direct ADDR NAME   a DNS server other than the resolver answers an A query
  upload URL N...        one POST of N bytes per N, each sent in one piece on its own
                         connection: the server answers only once it has read them all
  connections URL N      N connections are opened at once; how many got an answer
                         (ANSWERED n), for the case's max_count
  timed_get URL N        N GETs of URL, one connection each: GET_P50_US, the median in µs
  timed_download URL     one GET of URL, read to the end: DOWNLOAD_KBPS, in kB/s (1000 bytes)

Every address in the args is on the test internet; nothing here reaches beyond it.
"""
import http.client
import os
import random
import socket
import ssl
import struct
import sys
import time
import urllib.parse

ARGS = sys.argv[1:-1]  # the last word is the runner's marker
TIMEOUT = 4


def say(*parts):
    print(*parts, flush=True)


def get(url, host_header=None):
    """The body of GET url, or None; the test servers' answers start with server= or host-."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "https":
        connection = http.client.HTTPSConnection(parts.hostname, parts.port or 443, timeout=TIMEOUT,
                                                 context=ssl.create_default_context())
    else:
        connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=TIMEOUT)
    try:
        connection.request("GET", parts.path or "/", headers={"Host": host_header or parts.netloc})
        return connection.getresponse().read().decode(errors="replace")
    except (OSError, http.client.HTTPException) as e:
        say(f"GET {url}: {type(e).__name__} {e}")
        return None
    finally:
        connection.close()


def read_reply(sock):
    """What the server sends until it closes (the test servers answer HTTP/1.0 and close)."""
    data = b""
    while len(data) < 65536:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def answered(body):
    return body is not None and (body.startswith("server=") or body.startswith("host-"))


def control(url):
    body = get(url)
    say("CONTROL ok" if answered(body) else f"CONTROL failed: {body!r}")


def resolve(name):
    try:
        found = sorted({info[4][0] for info in socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)})
        say(f"BREACH {name} resolved to {', '.join(found)}")
    except socket.gaierror as e:
        say(f"held: {name} does not resolve ({e})")


def http_attack(url, host_header=None):
    body = get(url, host_header)
    if answered(body):
        say(f"BREACH {url} answered: {body.strip()}")
    else:
        say(f"held: {url}")


def https(url):
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPSConnection(parts.hostname, parts.port or 443, timeout=TIMEOUT,
                                             context=ssl.create_default_context())
    try:
        connection.request("GET", parts.path or "/")
        body = connection.getresponse().read().decode(errors="replace")
        say(f"HTTPS verified: {body.strip()}")
    except ssl.SSLCertVerificationError as e:
        say(f"HTTPS refused: {e.reason} ({e.verify_message})")
    except (OSError, http.client.HTTPException) as e:
        say(f"HTTPS failed: {type(e).__name__} {e}")
    finally:
        connection.close()


def tls(address, port, sni, verified=False):
    if verified:
        context = ssl.create_default_context()
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # any certificate: the handshake alone is the attack
    try:
        with socket.create_connection((address, int(port)), timeout=TIMEOUT) as raw:
            with context.wrap_socket(raw, server_hostname=sni) as sock:
                sock.sendall(f"GET / HTTP/1.0\r\nHost: {sni}\r\n\r\n".encode())
                data = read_reply(sock).decode(errors="replace")
    except (OSError, ssl.SSLError) as e:
        say(f"held: TLS to {address}:{port} as {sni}: {type(e).__name__} {e}")
        return
    if "server=" in data:
        say(f"BREACH TLS to {address}:{port} as {sni} answered: {data.strip()}")
    else:
        say(f"held: TLS to {address}:{port} as {sni}: {data!r}")


def udp(address, port):
    token = f"echo-{random.getrandbits(64):016x}".encode()
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.settimeout(2)
        try:
            sock.sendto(token, (address, int(port)))
            data, _ = sock.recvfrom(4096)
        except OSError as e:
            say(f"held: UDP to {address}:{port}: {type(e).__name__} {e}")
            return
    say(f"BREACH UDP to {address}:{port} echoed {data!r}" if token in data else f"held: {data!r}")


def question(name, qtype):
    ident = random.getrandbits(16)
    labels = b"".join(bytes([len(part)]) + part.encode() for part in name.split("."))
    return ident, struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0) + labels + b"\0" + struct.pack(">HH", qtype, 1)


def ask(server, name, qtype):
    """(rcode, answer count, raw reply) from server over UDP, or None."""
    ident, query = question(name, qtype)
    family = socket.AF_INET6 if ":" in server else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.settimeout(3)
        try:
            sock.sendto(query, (server, 53))
            while True:
                reply, _ = sock.recvfrom(4096)
                if len(reply) >= 12 and struct.unpack(">H", reply[:2])[0] == ident:
                    flags, _, answers = struct.unpack(">HHH", reply[2:8])
                    return flags & 0xF, answers, reply
        except OSError as e:
            say(f"DNS to {server}: {type(e).__name__} {e}")
            return None


def resolver():
    with open("/etc/resolv.conf") as conf:
        for line in conf:
            words = line.split()
            if len(words) >= 2 and words[0] == "nameserver":
                return words[1]
    return "127.0.0.53"


def txt(name):
    server = resolver()
    reply = ask(server, name, 16)
    if reply and reply[0] == 0 and reply[1] > 0:
        say(f"BREACH TXT {name} from {server}: {reply[2][12:]!r}")
    else:
        say(f"held: TXT {name} from {server}: {reply[:2] if reply else 'no answer'}")


def dns_direct(server, name):
    reply = ask(server, name, 1)
    if reply and reply[1] > 0:
        say(f"BREACH {server} answered A {name} itself (rcode {reply[0]}, {reply[1]} answers)")
    else:
        say(f"held: {server} gave {reply[:2] if reply else 'no answer'}")


def upload(url, *sizes):
    parts = urllib.parse.urlsplit(url)
    for size in sizes:
        head = (f"POST {parts.path or '/'} HTTP/1.0\r\nHost: {parts.netloc}\r\n"
                f"Content-Length: {size}\r\n\r\n").encode()
        try:
            with socket.create_connection((parts.hostname, parts.port or 80), timeout=TIMEOUT) as sock:
                # One send: a gateway that reads the first bytes to judge the name gets the
                # body with them.
                sock.sendall(head + b"u" * int(size))
                body = read_reply(sock).decode(errors="replace")
        except OSError as e:
            say(f"held: upload of {size} bytes: {type(e).__name__} {e}")
            continue
        if "server=" in body:
            say(f"BREACH {size} bytes reached {url}: {body.splitlines()[-1]}")
        else:
            say(f"held: upload of {size} bytes got {body[:80]!r}")


def connections(url, count):
    parts = urllib.parse.urlsplit(url)
    socks = []
    for _ in range(int(count)):
        try:
            socks.append(socket.create_connection((parts.hostname, parts.port or 80), timeout=TIMEOUT))
        except OSError:
            pass
    time.sleep(1)  # while every one is open: a cap refuses those past it
    request = f"GET / HTTP/1.0\r\nHost: {parts.netloc}\r\n\r\n".encode()
    answers = 0
    for sock in socks:
        try:
            sock.settimeout(TIMEOUT)
            sock.sendall(request)
            if b"server=" in read_reply(sock):
                answers += 1
        except OSError:
            pass
    for sock in socks:
        sock.close()
    say(f"OPENED {len(socks)} ANSWERED {answers}")


def timed_get(url, count):
    times = []
    for _ in range(int(count)):
        start = time.perf_counter()
        body = get(url)
        elapsed = time.perf_counter() - start
        if body is None:
            return
        times.append(elapsed)
    times.sort()
    say(f"GET_P50_US {round(times[len(times) // 2] * 1e6)}")


def timed_download(url):
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=TIMEOUT)
    start = time.perf_counter()
    connection.request("GET", parts.path, headers={"Host": parts.netloc})
    response = connection.getresponse()
    received = 0
    while chunk := response.read(1 << 20):
        received += len(chunk)
    elapsed = time.perf_counter() - start
    connection.close()
    say(f"BYTES {received} DOWNLOAD_KBPS {round(received / elapsed / 1000)}")


def main():
    control_url, mode, *rest = ARGS
    control(control_url)
    attacks = {"https": https, "resolve": resolve, "http": http_attack, "tls": tls,
               "tls_verified": lambda *a: tls(*a, verified=True), "udp": udp, "txt": txt,
               "dns_direct": dns_direct, "upload": upload, "connections": connections, "timed_get": timed_get,
               "timed_download": timed_download}
    if mode != "none":
        attacks[mode](*rest)


if __name__ == "__main__":
    main()
