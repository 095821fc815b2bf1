#!/usr/bin/env bash
# Builds the image tests' images the way users build them, offline, with Debian's umoci and
# skopeo: OUT/layout is an OCI layout holding
#   py    a Debian rootfs of the host's python3, node, dash and a few coreutils with their
#         libraries, in layers with a whiteout (a file the second layer deletes) and an opaque
#         directory;
#   tool  a busybox-style image: one static binary and an Entrypoint;
# and OUT/py.tar and OUT/tool.tar are docker-archives (docker save's format) of the same, tagged
# test/py:TAG and test/tool:TAG (TAG defaults to 1).
# Given PROBE, py's /outside is an absolute symlink to PROBE, a directory the image holds too:
# a setup that resolved it from the host would mount over the host's PROBE instead.
set -euo pipefail
out=$1
helper=$2  # a static program for the tool image
tag=${3:-1}
probe=${4:-}
layout="$out/layout"
work="$out/work"
mkdir -p "$work"
umoci init --layout "$layout"

# Copies a host file, and the libraries a binary links, into the rootfs at the same paths,
# under /usr: the image's /bin, /lib and /lib64 link there, as Debian's merged /usr does.
copy_in() {
  local rootfs=$1 file=$2
  local to=$file
  case $file in /lib/* | /lib64/* | /bin/*) to=/usr$file ;; esac
  mkdir -p "$rootfs$(dirname "$to")"
  cp -L "$file" "$rootfs$to"
}
copy_binary() {
  local rootfs=$1 binary=$2
  copy_in "$rootfs" "$binary"
  for lib in $(ldd "$binary" | grep -o '/[^ ]*'); do copy_in "$rootfs" "$lib"; done
}

# py, layer 1: the interpreters, their libraries, an /etc of the image's own, and files that
# layer 2 deletes (a whiteout) and replaces wholesale (an opaque directory).
umoci new --image "$layout:py"
umoci unpack --image "$layout:py" "$work/py"
rootfs="$work/py/rootfs"
mkdir -p "$rootfs/usr/bin" "$rootfs/usr/lib" "$rootfs/usr/lib64"
ln -s usr/bin "$rootfs/bin"
ln -s usr/lib "$rootfs/lib"
ln -s usr/lib64 "$rootfs/lib64"
copy_binary "$rootfs" /usr/bin/python3.11
copy_binary "$rootfs" /usr/bin/node
ln -s python3.11 "$rootfs/usr/bin/python3"
# A shell and the few tools the battery's sh payloads call, so that the battery runs in it.
copy_binary "$rootfs" /usr/bin/dash
ln -s dash "$rootfs/usr/bin/sh"
for tool in basename cat cut date env grep head ln ls mkdir mktemp paste rm sed sleep sort tail timeout tr; do
  copy_binary "$rootfs" "$(readlink -f "$(command -v "$tool")")"
done
tar -C /usr/lib -cf - --exclude=test --exclude=idlelib --exclude=tkinter \
  --exclude=ensurepip --exclude=lib2to3 --exclude=pydoc_data --exclude='config-3.11-*' python3.11 |
  tar -C "$rootfs/usr/lib" -xf -
# The libraries python's own extension modules link (libssl for ssl, libffi for ctypes...).
for module in /usr/lib/python3.11/lib-dynload/*.so; do
  for lib in $(ldd "$module" | grep -o '/[^ ]*'); do copy_in "$rootfs" "$lib"; done
done
mkdir -p "$rootfs/etc" "$rootfs/srv/app" "$rootfs/srv/data/old"
printf 'PRETTY_NAME="smolbox test image"\nID=smolbox-test\n' > "$rootfs/etc/os-release"
printf 'root:x:0:0:root:/root:/bin/sh\napp:x:1234:1234:app:/srv/app:/bin/sh\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\napp:x:1234:\n' > "$rootfs/etc/group"
echo lower > "$rootfs/srv/data/old/file"
echo deleted > "$rootfs/srv/app/deleted.txt"
# A link as images have them: resolv.conf into a /run the image lacks.
ln -s ../run/systemd/resolve/stub-resolv.conf "$rootfs/etc/resolv.conf"
# A trust store of the image's own, its bundle an absolute link that leads into the image only
# when resolved in its root (the host has no /etc/image-ca.pem).
mkdir -p "$rootfs/etc/ssl/certs"
printf '# the image'"'"'s own trust store\n' > "$rootfs/etc/image-ca.pem"
ln -s /etc/image-ca.pem "$rootfs/etc/ssl/certs/ca-certificates.crt"
if [ -n "$probe" ]; then
  mkdir -p "$rootfs$probe"
  ln -s "$probe" "$rootfs/outside"
fi
umoci repack --image "$layout:py" "$work/py"

# py, layer 2: umoci writes a whiteout for the deleted file.
rm -rf "$work/py"
umoci unpack --image "$layout:py" "$work/py"
rm "$work/py/rootfs/srv/app/deleted.txt"
echo 'print("app", 6 * 7)' > "$work/py/rootfs/srv/app/main.py"
umoci repack --image "$layout:py" "$work/py"

# py, layer 3: an opaque directory, as docker's overlay driver writes one for a directory
# removed and made again in one step.
mkdir -p "$work/opaque/srv/data"
touch "$work/opaque/srv/data/.wh..wh..opq"
echo upper > "$work/opaque/srv/data/new"
tar -C "$work/opaque" -cf "$work/opaque.tar" srv
umoci raw add-layer --image "$layout:py" "$work/opaque.tar"
umoci config --image "$layout:py" --config.env PATH=/usr/bin:/bin --config.env FROM_IMAGE=yes \
  --config.env OVERRIDE=image --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --config.workingdir /srv/app --config.user app \
  --config.cmd python3 --config.cmd main.py

# tool: one static binary as the Entrypoint, with a default argument in Cmd.
umoci new --image "$layout:tool"
umoci unpack --image "$layout:tool" "$work/tool"
mkdir -p "$work/tool/rootfs/bin" "$work/tool/rootfs/etc"
cp "$helper" "$work/tool/rootfs/bin/tool"
echo 'ID=tool' > "$work/tool/rootfs/etc/os-release"
umoci repack --image "$layout:tool" "$work/tool"
umoci config --image "$layout:tool" --config.entrypoint /bin/tool --config.cmd /etc/os-release \
  --config.user 4321
rm -rf "$work"
umoci gc --layout "$layout"

skopeo --insecure-policy copy -q "oci:$layout:py" "docker-archive:$out/py.tar:test/py:$tag"
skopeo --insecure-policy copy -q "oci:$layout:tool" "docker-archive:$out/tool.tar:test/tool:$tag"
