#!/usr/bin/env bash
# Thread scaling: the multi-threaded programs of bench/src at 1, 2, 4, 8, 16 and 32 threads
# (64 too where the machine has 32 cores or more) under glibc, jemalloc, mimalloc, tcmalloc,
# snmalloc and retype-malloc (LD_PRELOAD), allocators alternated run by run. Each thread does
# the same work at every thread count (kmeans: the same points shared among them). Prints each
# figure as a ratio to the best peer, writes target/bench/scaling.csv, docs/scaling.md and
# docs/img/scaling.svg (the doc only from a run of every program).
#   bench/scaling.sh                  3 repetitions (a run takes about 0.3 s while threads <= cores;
#                                     10 to 15 minutes on 16 cores, estimated from 2-thread runs)
#   REPS=5 bench/scaling.sh           more repetitions
#   THREADS="4 16" bench/scaling.sh   these thread counts only
#   PROGRAMS="xmalloc pool" bench/scaling.sh
#                                     these programs only (names as in the tables); prints the
#                                     ratios and writes the CSV, leaves the doc as it is
#   QUICK=1 bench/scaling.sh          tiny parameters, 1 and 2 threads, 1 repetition (a smoke test)
#   MERGE=other.csv bench/scaling.sh  the doc also shows another machine's CSV (same columns)
#   NOTE="..." bench/scaling.sh       one more sentence at the top of the doc (why, who, what is missing)
#   BENCH_LIBS=DIR bench/scaling.sh   on a machine without the toolchain: the libraries, programs and
#                                     GNU time that `bench/pack.sh DIR` copied there (bring the CSV
#                                     back and pass it as MERGE= where the doc is written)
set -euo pipefail
cd "$(dirname "$0")/.."
CMD="" # the command line as given, for the doc
for v in QUICK REPS THREADS PROGRAMS MERGE; do
  case ${!v:-} in "") ;; *" "*) CMD+="$v=\"${!v}\" " ;; *) CMD+="$v=${!v} " ;; esac
done
CMD+="bench/scaling.sh"
REPS=${REPS:-3}
OUT=target/bench
mkdir -p "$OUT" docs/img
source bench/allocators.sh
if [ -n "${BENCH_LIBS:-}" ]; then ALLOC[snmalloc]=$(echo "$BENCH_LIBS"/libsnmallocshim-*.so); else ALLOC[snmalloc]=$(bash bench/snmalloc.sh); fi
ORDER=(glibc jemalloc mimalloc tcmalloc snmalloc retype)
CORES=$(nproc)
if [ "${QUICK:-0}" = 1 ]; then DEFAULT_THREADS="1 2"
elif [ "$CORES" -ge 32 ]; then DEFAULT_THREADS="1 2 4 8 16 32 64" # up to twice the cores, as far as the programs go
else DEFAULT_THREADS="1 2 4 8 16 32"; fi
THREADS=${THREADS:-$DEFAULT_THREADS}
for t in $THREADS; do
  [ "$t" -ge 1 ] && [ "$t" -le 64 ] || { echo "THREADS: each count 1..64 (the programs' limit), not $t" >&2; exit 2; }
done
# name | command line with T for the thread count (xmalloc: P, its producer-consumer pairs, T/2)
if [ "${QUICK:-0}" = 1 ]; then
  REPS=1
  SET=(
    "larson|larson T 4 1000 1000000" "xmalloc|xmalloc P 64 40" "mstress|mstress T 50 4"
    "rptest|rptest T 1000 500" "glibc-thread|glibc_thread T 2" "churn|churn T 1024 3"
    "alloc-test|alloc_test T 2" "cache-scratch|cache scratch T 1000 8 20000"
    "cache-thrash|cache thrash T 1000 8 20000" "kmeans|kmeans T 50000 16 10" "large|large T 2 2000 0"
    "pool|pool T 4096 1" "transient|transient T 1500 1000"
  )
else
  SET=(
    "larson|larson T 10 5000 1000000"
    "xmalloc|xmalloc P 64 500"
    "mstress|mstress T 50 25"
    "rptest|rptest T 2000 1000"
    "glibc-thread|glibc_thread T 10"
    "churn|churn T 1024 20"
    "alloc-test|alloc_test T 5"
    "cache-scratch|cache scratch T 1000 8 100000"
    "cache-thrash|cache thrash T 1000 8 100000"
    "kmeans|kmeans T 200000 64 10"
    "large|large T 4 100 1"
    "pool|pool T 65536 5"
    "transient|transient T 2000 2000"
  )
fi
if [ -n "${PROGRAMS:-}" ]; then
  CHOSEN=()
  for want in $PROGRAMS; do
    found=""
    for entry in "${SET[@]}"; do [ "${entry%%|*}" = "$want" ] && CHOSEN+=("$entry") && found=1; done
    [ -n "$found" ] || { echo "PROGRAMS: no program $want (one of: ${SET[*]%%|*})" >&2; exit 2; }
  done
  SET=("${CHOSEN[@]}")
fi
BIN=${BENCH_LIBS:-$OUT} # the programs: packed ones as they are, else built when older than their source
for entry in "${SET[@]}"; do # each program's binary, the first word of its command line
  bin=${entry#*|}; bin=${bin%% *}
  if [ -n "${BENCH_LIBS:-}" ]; then [ -x "$BIN/$bin" ] || { echo "BENCH_LIBS: no $BIN/$bin" >&2; exit 2; }
  elif ! { [ -x "$OUT/$bin" ] && [ "$OUT/$bin" -nt "bench/src/$bin.c" ]; }; then
    gcc -O2 -pthread -o "$OUT/$bin" "bench/src/$bin.c"
  fi
done

CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//; s/"//g')
MACHINE="$CPU, $CORES cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
CSV="$OUT/scaling.csv"
echo "bench,threads,allocator,rep,wall_s,rss_kib,ops_per_s,cores,machine,command" > "$CSV"
run_one() { # name threads alloc rep cmd...
  local name=$1 threads=$2 alloc=$3 rep=$4; shift 4
  local log="$OUT/scaling.log"
  local t0=$EPOCHREALTIME
  LD_PRELOAD="${ALLOC[$alloc]}" "$TIME" -f "TIME %M" -o "$OUT/scaling-time.txt" "$BIN/$1" "${@:2}" > "$log" 2>&1 ||
    { echo "FAILED: $name at $threads threads under $alloc" >&2; cat "$log" >&2; return 1; }
  local t1=$EPOCHREALTIME
  local wall; wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')
  read -r _ rss < "$OUT/scaling-time.txt"
  local ops; ops=$(sed -n 's/.*ops=\([0-9]*\) secs=\([0-9.]*\).*/\1 \2/p' "$log" | awk '{ if ($2 > 0) printf "%.0f", $1 / $2 }')
  echo "$name,$threads,$alloc,$rep,$wall,$rss,$ops,$CORES,\"$MACHINE\",$*" >> "$CSV"
}
for entry in "${SET[@]}"; do
  name=${entry%%|*}
  for t in $THREADS; do
    pairs=$(( t / 2 > 0 ? t / 2 : 1 ))
    cmd=$(echo "${entry#*|}" | sed "s/ T / $t /; s/ P / $pairs /")
    echo "== $name, $t threads: $cmd" >&2
    for rep in $(seq "$REPS"); do
      for alloc in "${ORDER[@]}"; do run_one "$name" "$t" "$alloc" "$rep" $cmd; done
    done
  done
done

DOC=(--svg docs/img/scaling.svg --md docs/scaling.md)
[ -z "${PROGRAMS:-}" ] || DOC=()
python3 bench/scaling.py $([ "${QUICK:-0}" = 1 ] && echo --quick) --command "$CMD" --load-start "$LOAD_START" --note "${NOTE:-}" \
  --snmalloc "$(basename "${ALLOC[snmalloc]}" .so | sed 's/.*-//')" "${DOC[@]}" "$CSV" ${MERGE:-}
