# Sourced by bench/run.sh and bench/hardened.sh: the benchmark set (SET: name|program and
# arguments; QUICK=1 gives tiny parameters and REPS=1) and run_one, which runs one program
# under one allocator of ALLOC and appends its row to $CSV; $OUT holds the built programs.
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
