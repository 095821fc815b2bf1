"""A real `smolbox serve` for the SDK's tests: $SMOLBOX names the binary (ctest sets it)."""

import os
import signal
import subprocess
import tempfile

import pytest

import smolbox


def _smolbox():
    path = os.environ.get("SMOLBOX")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("$SMOLBOX does not name a smolbox binary")
    return path


class Server:
    def __init__(self, *flags, listen=None):
        self.dir = tempfile.TemporaryDirectory(prefix="smolbox-sdk-")
        listen = listen or f"unix:{self.dir.name}/api.sock"
        self.process = subprocess.Popen([_smolbox(), "serve", "--listen", listen, *flags],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        prefix = "smolbox serve: listening on "
        if not line.startswith(prefix):
            self.stop()
            raise RuntimeError(f"smolbox serve did not start: {line!r} {self.process.stderr.read()!r}")
        self.address = line[len(prefix):].strip()

    def client(self, **kwargs):
        return smolbox.Client(self.address, **kwargs)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=60)
        self.dir.cleanup()


@pytest.fixture(scope="module")
def server():
    s = Server()
    yield s
    s.stop()


@pytest.fixture
def client(server):
    return server.client()
