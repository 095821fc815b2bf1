"""A minimal npm registry and a minimal PyPI simple index, as files for the test internet's
servers (GET /files/PATH, conformance/test_internet/servers.py). Usage:

  make_registries.py FILES_DIR BASE_URL      e.g. .../files https://api.allowed.test/files

writes, each with one package of one version:
  npm/smolpad                           the packument (dist.tarball, shasum, integrity)
  npm/smolpad/-/smolpad-1.0.0.tgz       the tarball: package/package.json and index.js
  pypi/simple/smolpkg/index.html        the project page, its link carrying the wheel's sha256
  pypi/files/smolpkg-1.0-py3-none-any.whl

Then `npm install --registry BASE_URL/npm/ smolpad` and `pip install --index-url
BASE_URL/pypi/simple/ smolpkg` are the real clients' own protocol. Stdlib only.
"""
import base64
import csv
import hashlib
import io
import json
import os
import sys
import tarfile
import zipfile

NPM_INDEX = "module.exports = (s, n) => String(s).padStart(n, '.');\n"
PY_INIT = "def pad(s, n):\n    return str(s).rjust(n, '.')\n"


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def npm_tarball():
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, text in [("package/package.json", json.dumps({"name": "smolpad", "version": "1.0.0", "main": "index.js"})),
                           ("package/index.js", NPM_INDEX)]:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def npm(files, base):
    tarball = npm_tarball()
    write(os.path.join(files, "npm/smolpad/-/smolpad-1.0.0.tgz"), tarball)
    packument = {
        "name": "smolpad",
        "dist-tags": {"latest": "1.0.0"},
        "versions": {"1.0.0": {
            "name": "smolpad", "version": "1.0.0", "main": "index.js",
            "dist": {
                "tarball": f"{base}/npm/smolpad/-/smolpad-1.0.0.tgz",
                "shasum": hashlib.sha1(tarball).hexdigest(),
                "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode(),
            },
        }},
    }
    # A file beside the directory of its tarballs: the server answers npm/smolpad with it.
    write(os.path.join(files, "npm/smolpad/index.html"), json.dumps(packument).encode())


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def wheel():
    info = "smolpkg-1.0.dist-info"
    members = {
        "smolpkg/__init__.py": PY_INIT.encode(),
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: smolpkg\nVersion: 1.0\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: make_registries\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    rows = io.StringIO()
    writer = csv.writer(rows, lineterminator="\n")
    for name, data in members.items():
        writer.writerow([name, record_hash(data), len(data)])
    writer.writerow([f"{info}/RECORD", "", ""])
    members[f"{info}/RECORD"] = rows.getvalue().encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return out.getvalue()


def pypi(files, base):
    name = "smolpkg-1.0-py3-none-any.whl"
    data = wheel()
    write(os.path.join(files, "pypi/files", name), data)
    page = (f'<!DOCTYPE html><html><body><a href="{base}/pypi/files/{name}#sha256={hashlib.sha256(data).hexdigest()}">'
            f"{name}</a></body></html>\n")
    write(os.path.join(files, "pypi/simple/smolpkg/index.html"), page.encode())


def main():
    files, base = sys.argv[1], sys.argv[2].rstrip("/")
    npm(files, base)
    pypi(files, base)


if __name__ == "__main__":
    main()
