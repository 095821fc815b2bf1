"""The connection to a `smolbox serve`: a unix socket (the default) or HTTP(S) with a token."""

import http.client
import json
import os
import random
import socket
import ssl
import time
from urllib.parse import urlsplit

from .errors import ApiError, SmolboxError


def default_address():
    """$SMOLBOX_API, else the server's default socket: /run/smolbox/api.sock for root, else
    $XDG_RUNTIME_DIR/smolbox/api.sock."""
    if os.environ.get("SMOLBOX_API"):
        return os.environ["SMOLBOX_API"]
    if os.geteuid() == 0:
        return "unix:/run/smolbox/api.sock"
    runtime = os.environ.get("XDG_RUNTIME_DIR", f"/run/user/{os.geteuid()}")
    return f"unix:{runtime}/smolbox/api.sock"


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


class Client:
    """A server's address and credentials. Each request opens its own connection, so one
    Client can be shared by threads.

    address: "unix:/path/api.sock", "http://127.0.0.1:8080" or "https://host:8443".
    token: the server's bearer token (tcp listeners need one); default $SMOLBOX_TOKEN.
    cafile: the CA (or self-signed certificate) to trust for https.
    timeout: seconds to wait for a reply; None waits as long as the run's own limits.
    retry_for: how long to go on retrying a request the server refuses as busy (429, its queue
        full), waiting as its Retry-After asks and backing off; at most timeout. 0: never retry.
    """

    def __init__(self, address=None, token=None, cafile=None, timeout=None, retry_for=60):
        self.address = address or default_address()
        self.token = token if token is not None else os.environ.get("SMOLBOX_TOKEN")
        self.timeout = timeout
        self.retry_for = retry_for if timeout is None else min(retry_for, timeout)
        self._cafile = cafile
        if self.address.startswith("unix:"):
            self._unix = self.address[len("unix:"):]
        else:
            self._unix = None
            self._url = urlsplit(self.address)
            if self._url.scheme not in ("http", "https") or not self._url.hostname:
                raise SmolboxError(f"address {self.address!r}: use unix:PATH, http://HOST:PORT or https://HOST:PORT")

    def _connect(self):
        if self._unix is not None:
            return _UnixConnection(self._unix, self.timeout)
        if self._url.scheme == "https":
            context = ssl.create_default_context(cafile=self._cafile)
            return http.client.HTTPSConnection(self._url.hostname, self._url.port, timeout=self.timeout,
                                               context=context)
        return http.client.HTTPConnection(self._url.hostname, self._url.port, timeout=self.timeout)

    def _send(self, method, path, body=None, content_type="application/json"):
        """Sends a request, again while the server answers 429 and retry_for allows; returns the
        open connection and its response."""
        deadline = time.monotonic() + self.retry_for
        backoff = 0.05
        while True:
            try:
                return self._send_once(method, path, body, content_type)
            except ApiError as e:
                left = deadline - time.monotonic()
                if e.status != 429 or left <= 0:
                    raise
                # As the server asks, never less than the backoff, with jitter so that a burst
                # of refused clients does not come back at once.
                wait = max(e.retry_after or 0, backoff) * random.uniform(0.5, 1.5)
                time.sleep(min(wait, left))
                backoff = min(backoff * 2, 2.0)

    def _send_once(self, method, path, body, content_type):
        conn = self._connect()
        headers = {}
        if body is not None:
            headers["Content-Type"] = content_type
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        try:
            conn.request(method, path, body=data, headers=headers)
            response = conn.getresponse()
        except OSError as e:
            conn.close()
            raise SmolboxError(f"cannot reach the server at {self.address}: {e}") from e
        if response.status >= 400:
            raw = response.read()
            conn.close()
            raise _api_error(response.status, raw, response.getheader("Retry-After"))
        return conn, response

    def request(self, method, path, body=None, content_type="application/json"):
        """A request whose reply is one JSON document."""
        return json.loads(self.request_bytes(method, path, body, content_type) or b"null")

    def request_bytes(self, method, path, body=None, content_type="application/json"):
        """A request whose reply is returned as it came, as bytes."""
        conn, response = self._send(method, path, body, content_type)
        try:
            return response.read()
        finally:
            conn.close()

    def stream(self, method, path, body=None):
        """A request whose reply is NDJSON: yields each line, parsed, as it arrives. Closing the
        generator hangs up, which cancels the exec on the server."""
        conn, response = self._send(method, path, body)
        try:
            for line in response:
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()

    def health(self):
        return self.request("GET", "/v1/health")


def _api_error(status, raw, retry_after=None):
    try:
        seconds = float(retry_after) if retry_after is not None else None
    except ValueError:
        seconds = None  # an HTTP date, which this server never sends
    try:
        error = json.loads(raw)["error"]
        return ApiError(status, error.get("field", ""), error.get("reason", ""), seconds)
    except (ValueError, KeyError, TypeError):
        return ApiError(status, "", raw.decode("utf-8", "replace")[:200], seconds)
