#!/usr/bin/env bash
# Seed 004's experiment (a huge-page-aware allocator against jemalloc: its Figures 1 and 2) on our
# clean-room programs with the seed's parameters, under retype-malloc, jemalloc, glibc, mimalloc
# and tcmalloc (LD_PRELOAD), allocators alternated run by run, each configuration REPS times:
#   Figure 1: wall time of each benchmark, as the percentage difference from jemalloc's;
#   Figure 2: k-means over the point counts of the seed's sweep, the same difference.
# The seed counts TLB reads, refills and walks; these VMs expose no TLB counters, so instead each
# benchmark runs once more under each allocator while /proc/PID/smaps_rollup is read every 20 ms
# (peak AnonHugePages against peak Rss), and memaccess reports the share of its list in huge pages
# and the time of its walks alone (where fewer TLB misses would show, without the page faults).
#   bench/seed004.sh                 5 repetitions (about 15 minutes on 2 cores)
#   REPS=3 bench/seed004.sh          fewer
#   QUICK=1 bench/seed004.sh         tiny parameters, 1 repetition (a smoke test of the script)
# Writes target/bench/seed004.csv and seed004-huge.csv, then bench/seed004.py prints the tables of
# docs/reproduction-004.md and draws docs/img/seed004-fig1.svg and seed004-fig2.svg.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-5}
OUT=target/bench
mkdir -p "$OUT" docs/img
source bench/allocators.sh
ORDER=(retype jemalloc glibc mimalloc tcmalloc)
for p in glibc_simple memaccess kmeans richards; do gcc -O2 -pthread -o "$OUT/$p" "bench/src/$p.c"; done

# The seed's parameters: glibc's bench at 2,000,000 iterations per batch size (80000 × 25) for
# 16, 32 and 64 bytes; memaccess with 64-byte nodes, the working set doubling up to half the
# block (8 GiB on the seed's board, 1 GiB here: lists up to 512 MiB), one walk, no threads;
# k-means with 40 dimensions and 100 clusters on the seed's 10,000 points (10 iterations here,
# where the seed's ran to convergence); Richards as it comes.
POINTS=(1000 2000 5000 10000 50000 100000 150000 200000)
KM_ITERS=10
if [ "${QUICK:-0}" = 1 ]; then
  REPS=1
  FIG1=("glibc|glibc_simple 2000 16 full" "memaccess-seq|memaccess 64 seq 1 0"
    "memaccess-random|memaccess 64 random 1 0" "kmeans|kmeans 2 1000 100 2 40" "richards|richards 100000")
  POINTS=(1000 2000)
  KM_ITERS=2
else
  FIG1=("glibc|glibc_simple 80000 16 full" "memaccess-seq|memaccess 1024 seq 1 0"
    "memaccess-random|memaccess 1024 random 1 0" "kmeans|kmeans 2 10000 100 $KM_ITERS 40"
    "richards|richards 2000000")
fi
FIG2=()
for p in "${POINTS[@]}"; do FIG2+=("kmeans-$p|kmeans 2 $p 100 $KM_ITERS 40"); done

CSV="$OUT/seed004.csv"
echo "figure,bench,allocator,rep,wall_s,rss_kib,list_kib,list_huge_share,walk_s" > "$CSV"
# figure name alloc rep cmd...
run_one() {
  local fig=$1 name=$2 alloc=$3 rep=$4; shift 4
  local log="$OUT/seed004-run.log" t0 t1 list share walk
  t0=$(date +%s%N)
  env LD_PRELOAD="${ALLOC[$alloc]}" /usr/bin/time -f "%M" -o "$OUT/time.txt" "$OUT/$1" "${@:2}" > "$log" 2>&1 ||
    { echo "FAILED: $name under $alloc" >&2; cat "$log" >&2; return 1; }
  t1=$(date +%s%N)
  list=$(sed -n 's/.*list_kib=\([0-9]*\).*/\1/p' "$log")
  share=$(sed -n 's/.*huge_share=\([0-9.]*\).*/\1/p' "$log")
  walk=$(sed -n 's/.*walk_secs=\([0-9.]*\).*/\1/p' "$log")
  echo "$fig,$name,$alloc,$rep,$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }'),$(cat "$OUT/time.txt"),$list,$share,$walk" >> "$CSV"
}
echo "start $(date -u '+%F %T') load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for fig in 1 2; do
  if [ $fig = 1 ]; then SET=("${FIG1[@]}"); else SET=("${FIG2[@]}"); fi
  for entry in "${SET[@]}"; do
    name=${entry%%|*}; cmd=${entry#*|}
    echo "== figure $fig, $name: $cmd" >&2
    for rep in $(seq "$REPS"); do
      for alloc in "${ORDER[@]}"; do run_one "$fig" "$name" "$alloc" "$rep" $cmd; done
    done
  done
done

# Huge pages: one more run of each Figure 1 benchmark per allocator, sampled every 20 ms.
HUGE="$OUT/seed004-huge.csv"
echo "bench,allocator,peak_anon_huge_kib,peak_rss_kib" > "$HUGE"
for entry in "${FIG1[@]}"; do
  name=${entry%%|*}; read -r -a cmd <<< "${entry#*|}"
  for alloc in "${ORDER[@]}"; do
    env LD_PRELOAD="${ALLOC[$alloc]}" "$OUT/${cmd[0]}" "${cmd[@]:1}" > /dev/null &
    pid=$! huge=0 rss=0
    while kill -0 "$pid" 2> /dev/null; do
      read -r h r < <(awk '/^AnonHugePages:/ { h = $2 } /^Rss:/ { r = $2 } END { print h + 0, r + 0 }' "/proc/$pid/smaps_rollup" 2> /dev/null || echo "0 0")
      [ "$h" -gt "$huge" ] && huge=$h
      [ "$r" -gt "$rss" ] && rss=$r
      sleep 0.02
    done
    wait "$pid"
    echo "$name,$alloc,$huge,$rss" >> "$HUGE"
  done
done
echo "end $(date -u '+%F %T') load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 bench/seed004.py "$CSV" "$HUGE" docs/img
