#!/usr/bin/env bash
# Builds Hoard's LD_PRELOAD library (libhoard.so) from its source, and prints its path. Hoard
# (Berger et al. 2000), seed 003's first allocator, is neither packaged in Debian 12 nor vendored
# by a crate, so this clones emeryberger/Hoard and the Heap-Layers it includes from GitHub at
# pinned commits and builds them with Hoard's own GNUmakefile (its Linux-gcc-x86_64 target,
# g++). Heap-Layers is pinned to its last commit before Hoard's: later ones (from 2026-03-03)
# export C23's free_sized through an xxfree_sized that Hoard does not define, and a program
# that binds it fails with "undefined symbol: xxfree_sized". Cached under target/bench/hoard/ and rebuilt only when missing; nothing here is
# committed.
#   bench/peers/hoard.sh          the path of the library (built on first use, about 10 s)
# Where GitHub cannot be reached, HOARD_GIT and HEAP_LAYERS_GIT name other clones of the two
# repositories (a directory or URL git can clone; the pinned commits must be in them).
set -euo pipefail
cd "$(dirname "$0")/../.."
HOARD=b29abf40f4c9dbf9e74ad14aa29c578841b6881a       # Hoard 3.2 as of 2025-12-30
HEAP_LAYERS=89b9c6d0aa28773ccb187804b6f699824bdf7bb7 # Heap-Layers as of 2025-12-29: what Hoard built with then
HOARD_GIT=${HOARD_GIT:-https://github.com/emeryberger/Hoard}
HEAP_LAYERS_GIT=${HEAP_LAYERS_GIT:-https://github.com/emeryberger/Heap-Layers}
DIR=$PWD/target/bench/hoard
SO=$DIR/${HOARD:0:7}-${HEAP_LAYERS:0:7}/libhoard.so
if [ ! -f "$SO" ]; then
  bash scripts/install-deps git make g++ >&2
  rm -rf "$DIR/src"
  mkdir -p "$DIR"
  # clone REPO COMMIT DIR: the repository at exactly COMMIT.
  clone() {
    git clone -q "$1" "$3"
    git -C "$3" -c advice.detachedHead=false checkout -q "$2"
  }
  clone "$HOARD_GIT" "$HOARD" "$DIR/src"
  # The GNUmakefile expects Heap-Layers inside src/ (its own rule would clone the newest).
  clone "$HEAP_LAYERS_GIT" "$HEAP_LAYERS" "$DIR/src/src/Heap-Layers"
  echo "building Hoard ${HOARD:0:7} with Heap-Layers ${HEAP_LAYERS:0:7}" >&2
  make -C "$DIR/src/src" CXX=g++ Linux-gcc-x86_64 >"$DIR/make.log" 2>&1 ||
    { cat "$DIR/make.log" >&2; exit 1; }
  mkdir -p "$(dirname "$SO")"
  cp "$DIR/src/src/libhoard.so" "$SO"
fi
echo "$SO"
