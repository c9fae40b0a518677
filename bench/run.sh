#!/usr/bin/env bash
# Runs every benchmark program in bench/src under glibc, jemalloc, mimalloc, tcmalloc and
# retype-malloc (LD_PRELOAD), alternating allocators run by run, and writes docs/benchmarks.md.
#   bench/run.sh            default set, 3 repetitions (about 10-15 minutes on 2 cores)
#   REPS=5 bench/run.sh     more repetitions
#   QUICK=1 bench/run.sh    tiny parameters, 1 repetition (a smoke test of the script)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
OUT=target/bench
mkdir -p "$OUT" docs
source bench/allocators.sh
# retype-hardened: the same library in hardened mode (RETYPE_MALLOC_HARDENED=1), for its cost.
ALLOC[retype-hardened]=${ALLOC[retype]}
ORDER=(mimalloc retype glibc jemalloc tcmalloc retype-hardened)
for f in bench/src/*.c; do gcc -O2 -pthread -o "$OUT/$(basename "$f" .c)" "$f"; done

source bench/programs.sh

CSV="$OUT/results.csv"
echo "bench,allocator,rep,wall_s,rss_kib,ops_per_s" > "$CSV"
for entry in "${SET[@]}"; do
  name=${entry%%|*}; cmd=${entry#*|}
  echo "== $name: $cmd" >&2
  for rep in $(seq "$REPS"); do
    for alloc in "${ORDER[@]}"; do run_one "$name" "$alloc" "$rep" $cmd; done
  done
done

# Huge pages: the linked list under retype-malloc with huge pages from the start
# (RETYPE_MALLOC_HUGEPAGES_MIN_MIB=0), with the default threshold (48 MiB) and off, alternated;
# then the share of a 128 MiB heap of small objects that the kernel backs with huge pages.
HP="$OUT/hugepages.csv"
echo "setting,rep,wall_s,rss_kib,ops_per_s" > "$HP"
LL=${LL:-linkedlist 256 2}; [ "${QUICK:-0}" = 1 ] && LL="linkedlist 16 1"; export LL
for rep in $(seq "$REPS"); do
  for setting in always default off; do
    case $setting in
      always) ENVS="RETYPE_MALLOC_HUGEPAGES_MIN_MIB=0" ;;
      default) ENVS="" ;;
      off) ENVS="RETYPE_MALLOC_HUGEPAGES=0" ;;
    esac
    ENVS="$ENVS" run_one "ll-hugepages-$setting" retype "$rep" $LL
    tail -1 "$CSV" | awk -F, -v s="$setting" '{print s "," $3 "," $4 "," $5 "," $6}' >> "$HP"
    sed -i '$ d' "$CSV"
  done
done
HEAP="$OUT/hugeheap.txt"; : > "$HEAP"
for alloc in retype mimalloc glibc; do
  printf '%s ' "$alloc" >> "$HEAP"
  LD_PRELOAD="${ALLOC[$alloc]}" "$OUT/hugeheap" 128 | head -1 >> "$HEAP"
done

# Written aside first: the report reads the hand-written block of the doc it replaces.
python3 bench/report.py "$CSV" "$HP" "$HEAP" "$REPS" docs/benchmarks.md > "$OUT/benchmarks.md"
mv "$OUT/benchmarks.md" docs/benchmarks.md
echo "wrote docs/benchmarks.md" >&2
