#!/usr/bin/env bash
# Cost of one memory-manager request (allocate or free) per placement policy:
# instructions counted by callgrind at seed 000's 22 slabs and beyond, and
# nanoseconds from 22 to 100,000 slabs. Writes docs/bench-mm.md.
#
# Instructions per request = (I(2N) - I(N)) / (requests(2N) - requests(N)),
# counting only inside MemoryManager::alloc and ::free (callgrind --toggle-collect), so
# neither the harness nor the set-up counts. The page's hand-written part, from
# "## Reading the figures" on, is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps valgrind
cargo build --release -q -p retype
R=target/release/retype
N=${N:-20000}
out=docs/bench-mm.md
reading=$(sed -n '/^## Reading the figures/,$p' "$out" 2>/dev/null || true)

count() { # policy slabs ops -> "instructions requests"
  valgrind --tool=callgrind --callgrind-out-file=/dev/null --toggle-collect='retype_core::mm::MemoryManager::alloc' \
    --toggle-collect='retype_core::mm::MemoryManager::free' \
    "$R" bench mm --policy "$1" --slabs "$2" --ops "$3" 2>&1 |
    awk '/Collected/ {i=$4} / requests / {r=$4} END {print i, r}'
}
per_request() { # policy slabs
  read -r i1 r1 < <(count "$1" "$2" "$N")
  read -r i2 r2 < <(count "$1" "$2" $((2 * N)))
  echo $(( (i2 - i1) / (r2 - r1) ))
}

{
  echo "# Memory-manager request cost"
  echo
  echo "Made by \`bench/mm-callgrind.sh\` on $(date -u +%Y-%m-%d): $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')."
  echo "Requests: seed 000's uniform generator (seed 1, 52 % frees), made before timing; every policy sees the same ones."
  echo "Slabs: seed 000's 22 sizes (2,723,328 bytes), repeated for larger counts."
  echo
  echo "## Instructions per request (callgrind, N=$N and 2N generated requests)"
  echo
  echo "| policy | 22 slabs | 2,200 slabs | 100,000 slabs |"
  echo "|---|---:|---:|---:|"
  for p in blind-next-fit next-fit first-fit best-fit worst-fit class-fit; do
    a=$(per_request "$p" 22)
    b=$(per_request "$p" 2200)
    c=$(per_request "$p" 100000)
    echo "| $p | $a | $b | $c |"
  done
  echo
  echo "## Nanoseconds per request (wall clock, one run)"
  echo
  echo '```'
  echo "\$ retype bench mm --slabs 22,2200 --ops 100000"
  "$R" bench mm --slabs 22,2200 --ops 100000
  echo "\$ retype bench mm --slabs 22000,100000 --ops 100000"
  "$R" bench mm --slabs 22000,100000 --ops 100000
  echo '```'
  if [ -n "$reading" ]; then
    echo
    echo "$reading"
  fi
} > "$out"
echo "wrote $out"
