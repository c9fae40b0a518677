#!/usr/bin/env bash
# Packs what bench/scaling.sh runs into one folder, for a machine that has neither Debian's
# allocator packages nor cargo nor a compiler (an x86-64 Linux with a glibc at least as new as
# this one's): the peers' libraries, snmalloc's shim, retype-malloc's preload library, the
# compiled programs of bench/src and GNU time. There: BENCH_LIBS=DIR bench/scaling.sh.
#   bench/pack.sh DIR
set -euo pipefail
[ $# = 1 ] || { echo "usage: bench/pack.sh DIR" >&2; exit 2; }
DEST=$(realpath -m "$1") # before the cd below
cd "$(dirname "$0")/.."
source bench/allocators.sh
mkdir -p "$DEST"
for alloc in "${!ALLOC[@]}"; do [ -z "${ALLOC[$alloc]}" ] || cp -L "${ALLOC[$alloc]}" "$DEST/"; done
cp "$(bash bench/snmalloc.sh)" "$DEST/"
cp -L "$TIME" "$DEST/time"
for src in bench/src/*.c; do
  grep -q '^int main' "$src" || continue
  gcc -O2 -pthread -o "$DEST/$(basename "$src" .c)" "$src"
done
du -sh "$DEST" >&2
