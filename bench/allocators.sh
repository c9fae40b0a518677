# Sourced by the benchmark scripts: installs the peer allocators, builds ours,
# and names each library to preload in ALLOC (glibc: none). Ours is taken from
# CARGO_TARGET_DIR when it is set. With BENCH_LIBS=DIR (a folder bench/pack.sh filled, for a
# machine without Debian's packages or cargo) every library, and GNU time, comes from DIR.
if [ -n "${BENCH_LIBS:-}" ]; then
  LIB=$BENCH_LIBS
  RETYPE_SO=$BENCH_LIBS/libretype_malloc_preload.so
  TIME=$BENCH_LIBS/time
else
  bash scripts/install-deps libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4 time gcc
  cargo build -q -p retype-malloc-preload --release
  LIB=/usr/lib/x86_64-linux-gnu
  RETYPE_SO=${CARGO_TARGET_DIR:-$PWD/target}/release/libretype_malloc_preload.so
  TIME=/usr/bin/time
fi
declare -A ALLOC=(
  [retype]="$RETYPE_SO"
  [glibc]=""
  [jemalloc]="$LIB/libjemalloc.so.2"
  [mimalloc]="$LIB/libmimalloc.so.2"
  [tcmalloc]="$LIB/libtcmalloc_minimal.so.4"
)
