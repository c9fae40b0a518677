#!/usr/bin/env bash
# Builds snmalloc's LD_PRELOAD library (libsnmallocshim.so) from the sources that the
# snmalloc-sys crate vendors, and prints its path. Debian does not package snmalloc, so cargo
# fetches the crate (a throwaway project under target/ that depends on it) and snmalloc's own
# CMake builds the shim. The library is cached under target/bench/snmalloc/ and rebuilt only
# when missing; nothing here is committed.
#   bench/snmalloc.sh          the path of the library (built on first use, about a minute)
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.7.6 # snmalloc-sys, pinned so that every figure names the same snmalloc
DIR=$PWD/target/bench/snmalloc
SO=$DIR/libsnmallocshim-$VERSION.so
if [ ! -f "$SO" ]; then
  bash scripts/install-deps cmake g++ >&2
  source bench/peers/crate.sh
  SRC=$(crate_src snmalloc-sys "$VERSION" "$DIR")
  echo "building snmalloc's shim from $SRC/upstream" >&2
  cmake -S "$SRC/upstream" -B "$DIR/build" -DCMAKE_BUILD_TYPE=Release -DSNMALLOC_BUILD_TESTING=OFF >"$DIR/cmake.log" 2>&1 ||
    { cat "$DIR/cmake.log" >&2; exit 1; }
  cmake --build "$DIR/build" --target snmallocshim -j "$(nproc)" >>"$DIR/cmake.log" 2>&1 ||
    { cat "$DIR/cmake.log" >&2; exit 1; }
  cp "$DIR/build/libsnmallocshim.so" "$SO"
fi
echo "$SO"
