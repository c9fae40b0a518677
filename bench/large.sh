#!/usr/bin/env bash
# The large-block benchmark (bench/src/large.c, random 5-25 MB blocks in a pool of slots) under
# retype-malloc, glibc, jemalloc, mimalloc and tcmalloc (LD_PRELOAD), allocators alternated run
# by run, and the 256 MiB huge-page check (bench/src/hugeblock.c). Prints Markdown: median
# wall time and peak RSS (GNU time) per allocator, relative to retype-malloc.
#   bench/large.sh                          5 repetitions
#   REPS=3 bench/large.sh                   fewer
#   EXTRA=retype-before=/path/lib.so bench/large.sh   one more allocator (e.g. an older build)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-5}
OUT=target/bench
mkdir -p "$OUT"
source bench/allocators.sh
ORDER=(retype glibc jemalloc mimalloc tcmalloc)
if [ -n "${EXTRA:-}" ]; then ALLOC[${EXTRA%%=*}]=${EXTRA#*=}; ORDER+=("${EXTRA%%=*}"); fi
for p in large hugeblock; do gcc -O2 -pthread -o "$OUT/$p" "bench/src/$p.c"; done

SET=(
  "dense-1t|large 1 20 1000 1"
  "sparse-1t|large 1 20 1000 0"
  "dense-2t|large 2 20 500 1"
)
CSV="$OUT/large.csv"
echo "bench,allocator,rep,wall_s,rss_kib" > "$CSV"
for entry in "${SET[@]}"; do
  name=${entry%%|*}; cmd=${entry#*|}
  echo "== $name: $cmd" >&2
  for rep in $(seq "$REPS"); do
    for alloc in "${ORDER[@]}"; do
      env LD_PRELOAD="${ALLOC[$alloc]}" /usr/bin/time -f "%e %M" -o "$OUT/time.txt" "$OUT/"$cmd > /dev/null
      read -r wall rss < "$OUT/time.txt"
      echo "$name,$alloc,$rep,$wall,$rss" >> "$CSV"
    done
  done
done

echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
echo
python3 - "$CSV" "${ORDER[@]}" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
order = sys.argv[2:]
benches = list(dict.fromkeys(r["bench"] for r in rows))
med = {}
for r in rows:
    med.setdefault((r["bench"], r["allocator"]), []).append((float(r["wall_s"]), int(r["rss_kib"])))
for what, i, unit in (("wall time (s)", 0, 1), ("peak RSS (MiB)", 1, 1024)):
    print(f"| {what}, median | " + " | ".join(order) + " |")
    print("|---" * (len(order) + 1) + "|")
    for b in benches:
        m = {a: statistics.median(v[i] for v in med[(b, a)]) / unit for a in order}
        cells = [f"{m[a]:.2f} ({m[a] / m[order[0]]:.2f}×)" if a != order[0] else f"{m[a]:.2f}" for a in order]
        print(f"| {b} | " + " | ".join(cells) + " |")
    print()
PY
echo "256 MiB block, every page touched (hugeblock 256):"
echo
for alloc in "${ORDER[@]}"; do
  echo "    $alloc: $(LD_PRELOAD="${ALLOC[$alloc]}" "$OUT/hugeblock" 256)"
done
