# Sourced by the benchmark scripts: installs the peer allocators, builds ours,
# and names each library to preload in ALLOC (glibc: none). Ours is taken from
# CARGO_TARGET_DIR when it is set.
bash scripts/install-deps libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4 time gcc
cargo build -q -p retype-malloc-preload --release
LIB=/usr/lib/x86_64-linux-gnu
TARGET=${CARGO_TARGET_DIR:-$PWD/target}
declare -A ALLOC=(
  [retype]="$TARGET/release/libretype_malloc_preload.so"
  [glibc]=""
  [jemalloc]="$LIB/libjemalloc.so.2"
  [mimalloc]="$LIB/libmimalloc.so.2"
  [tcmalloc]="$LIB/libtcmalloc_minimal.so.4"
)
