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

# name | command line (program and arguments)
if [ "${QUICK:-0}" = 1 ]; then
  REPS=1
  SET=(
    "churn-1t|churn 1 1024 5" "larson-2t|larson 2 5 5000 50000" "xmalloc-64|xmalloc 1 64 200"
    "linkedlist|linkedlist 16 1"
  )
else
  SET=(
    "churn-1t-1k|churn 1 1024 50"
    "churn-1t-32k|churn 1 32768 10"
    "churn-2t-1k|churn 2 1024 25"
    "larson-2t|larson 2 30 5000 200000"
    "xmalloc-64|xmalloc 1 64 4000"
    "xmalloc-mixed|xmalloc 1 -1 600"
    "cache-scratch-2t|cache scratch 2 1000 8 100000"
    "cache-thrash-2t|cache thrash 2 1000 8 100000"
    "glibc-simple|glibc_simple 200000 16"
    "glibc-thread-2t|glibc_thread 2 5"
    "mstress-2t|mstress 2 50 25"
    "alloc-test-1t|alloc_test 1 10"
    "alloc-test-2t|alloc_test 2 5"
    "rptest-2t|rptest 2 2000 1000"
    "bignum|bignum 300 3000"
    "large-1t|large 1 20 1000 1"
    "linkedlist|linkedlist 256 2"
    "kmeans-2t|kmeans 2 200000 64 10"
    "richards|richards 2000000"
  )
fi

CSV="$OUT/results.csv"
echo "bench,allocator,rep,wall_s,rss_kib,ops_per_s" > "$CSV"
run_one() { # name alloc rep cmd... ; extra environment comes from $ENVS
  local name=$1 alloc=$2 rep=$3; shift 3
  local log="$OUT/run.log"
  local envs=${ENVS:-}
  [ "$alloc" = retype-hardened ] && envs="$envs RETYPE_MALLOC_HARDENED=1"
  # Wall time from bash's microsecond clock around the process: GNU time's %e steps by 10 ms,
  # a quarter of the shortest programs' time. Peak RSS from GNU time.
  local t0=$EPOCHREALTIME
  env $envs LD_PRELOAD="${ALLOC[$alloc]}" /usr/bin/time -f "TIME %M" -o "$OUT/time.txt" "$OUT/$1" "${@:2}" > "$log" 2>&1 || { echo "FAILED: $name under $alloc" >&2; cat "$log" >&2; return 1; }
  local t1=$EPOCHREALTIME
  local wall; wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')
  read -r _ rss < "$OUT/time.txt"
  local ops; ops=$(sed -n 's/.*ops=\([0-9]*\) secs=\([0-9.]*\).*/\1 \2/p' "$log" | awk '{ if ($2 > 0) printf "%.0f", $1 / $2 }')
  echo "$name,$alloc,$rep,$wall,$rss,$ops" >> "$CSV"
}
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

python3 bench/report.py "$CSV" "$HP" "$HEAP" "$REPS" > docs/benchmarks.md
echo "wrote docs/benchmarks.md" >&2
