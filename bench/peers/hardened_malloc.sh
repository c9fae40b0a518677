#!/usr/bin/env bash
# Builds GrapheneOS hardened_malloc's LD_PRELOAD library from the sources that the
# hardened-malloc-sys crate vendors, and prints its path. The crate ships the sources and
# hardened_malloc's config/VARIANT.mk but not its Makefile, so this compiles them as that
# Makefile does: its CONFIG_* values as -D defines, its flags, the C++ operators (new.cc)
# since CONFIG_CXX_ALLOCATOR is true in both variants. Two of its settings are left out:
# CONFIG_NATIVE (-march=native), so that the cached library is the same whatever CPU built
# it, and CONFIG_WERROR, so that a warning of another compiler does not stop the benchmark.
# The sources are C23 (alignas as a keyword), which gcc 12 reads with -std=c2x once
# <stdalign.h> is included. Cached under target/bench/hardened_malloc/ and rebuilt only when
# missing; nothing here is committed.
#   bench/peers/hardened_malloc.sh          the default variant (config/default.mk)
#   bench/peers/hardened_malloc.sh light    the light variant (config/light.mk)
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=16.0.2026071503 # hardened-malloc-sys, pinned: hardened_malloc as GrapheneOS tagged it then
VARIANT=${1:-default}
DIR=$PWD/target/bench/hardened_malloc
SO=$DIR/libhardened_malloc-$VARIANT-$VERSION.so
if [ ! -f "$SO" ]; then
  bash scripts/install-deps gcc g++ >&2
  source bench/peers/crate.sh
  SRC=$(crate_src hardened-malloc-sys "$VERSION" "$DIR")/vendor/hardened-malloc
  MK=$SRC/config/$VARIANT.mk
  [ -f "$MK" ] || { echo "no variant $VARIANT: $(ls "$SRC/config")" >&2; exit 2; }
  # The defines the Makefile passes: CONFIG_X as X, except the ones the sources read as CONFIG_X.
  DEFINES=$(sed -n 's/^CONFIG_\([A-Z0-9_]*\) *:= *\([^ #]*\).*/\1 \2/p' "$MK" | while read -r key value; do
    case $key in
      WERROR | NATIVE | CXX_ALLOCATOR | UBSAN) ;;
      SEAL_METADATA | EXTENDED_SIZE_CLASSES | LARGE_SIZE_CLASSES | CLASS_REGION_SIZE | STATS | SELF_INIT | LABEL_MEMORY)
        echo "-DCONFIG_$key=$value" ;;
      *) echo "-D$key=$value" ;;
    esac
  done)
  echo "building hardened_malloc ($VARIANT) from $SRC" >&2
  FLAGS="-pipe -O3 -flto -fPIC -fvisibility=hidden -fno-plt -fstack-clash-protection -fcf-protection -fstack-protector-strong"
  mkdir -p "$DIR/build-$VARIANT"
  cd "$DIR/build-$VARIANT"
  objs=()
  for f in chacha h_malloc memory pages random util; do
    # shellcheck disable=SC2086 # DEFINES and FLAGS are word lists
    gcc -std=c2x -include stdalign.h $FLAGS -D_GNU_SOURCE -I "$SRC/include" $DEFINES -c "$SRC/$f.c" -o "$f.o"
    objs+=("$f.o")
  done
  # shellcheck disable=SC2086
  g++ -std=c++17 -fsized-deallocation $FLAGS -D_GNU_SOURCE -I "$SRC/include" $DEFINES -c "$SRC/new.cc" -o new.o
  # shellcheck disable=SC2086
  gcc $FLAGS -Wl,-O1,--as-needed,-z,defs,-z,relro,-z,now,-z,nodlopen,-z,text -shared "${objs[@]}" new.o -lstdc++ -o "$SO"
fi
echo "$SO"
