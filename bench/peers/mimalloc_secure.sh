#!/usr/bin/env bash
# Builds mimalloc's shared library in its secure mode (MI_SECURE=ON: guard pages,
# encoded free lists, double-free detection, randomized allocation) from the sources that the
# libmimalloc-sys crate vendors (c_src/mimalloc/v2, the version that crate builds by default),
# and prints its path. With `plain`, the same sources without secure mode (MI_SECURE=0), so
# that what secure mode costs mimalloc is measured with nothing else different (Debian's
# libmimalloc2.0 is another version). Cached under target/bench/mimalloc_secure/ and rebuilt
# only when missing; nothing here is committed.
#   bench/peers/mimalloc_secure.sh        the secure library's path (built on first use)
#   bench/peers/mimalloc_secure.sh plain  the same sources' library without secure mode
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=0.1.49 # libmimalloc-sys, pinned: it vendors mimalloc 2.x
case ${1:-secure} in
  secure) MODE=secure SECURE=4 ;;
  plain) MODE=plain SECURE=0 ;;
  *) echo "usage: $0 [plain]" >&2; exit 2 ;;
esac
DIR=$PWD/target/bench/mimalloc_secure
SO=$DIR/libmimalloc-$MODE-$VERSION.so
if [ ! -f "$SO" ]; then
  bash scripts/install-deps gcc >&2
  source bench/peers/crate.sh
  SRC=$(crate_src libmimalloc-sys "$VERSION" "$DIR")/c_src/mimalloc/v2
  echo "building mimalloc (MI_SECURE=$SECURE) from $SRC" >&2
  # The crate ships CMakeLists.txt without the cmake/ folder it includes, so this compiles
  # mimalloc's single-source build (src/static.c) with what its CMake gives the shared library
  # in a Release build with MI_SECURE=ON (MI_SECURE=4; 0 for `plain`), the malloc entry
  # points overridden.
  mkdir -p "$DIR"
  gcc -O3 -DNDEBUG -fPIC -shared -fvisibility=hidden -ftls-model=initial-exec -fno-builtin-malloc \
    -DMI_SECURE=$SECURE -DMI_MALLOC_OVERRIDE -DMI_SHARED_LIB -DMI_SHARED_LIB_EXPORT \
    -I "$SRC/include" "$SRC/src/static.c" -pthread -o "$SO"
fi
echo "$SO"
