#!/usr/bin/env bash
# A/B of two builds of retype-malloc (and snmalloc beside them) on the multi-threaded programs
# of bench/src, alternated run by run (A B snmalloc, A B snmalloc, ...): prints each
# program's median time (its own `secs=`, start-up excluded) and peak RSS, and B's and snmalloc's as ratios to A's. For a
# change's before and after on a shared machine, in a few minutes.
#   bench/ab.sh A.so B.so                    the programs below, 2 threads, 5 rounds
#   ROUNDS=9 THREADS=4 bench/ab.sh A.so B.so
#   PROGRAMS="xmalloc pool" bench/ab.sh A.so B.so
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: bench/ab.sh A.so B.so" >&2; exit 2; }
A=$(realpath "$1") B=$(realpath "$2")
ROUNDS=${ROUNDS:-5}
T=${THREADS:-2}
SN=$(bash bench/snmalloc.sh)
OUT=target/bench/ab
mkdir -p "$OUT"
# name | command line (T: threads; P: producer-consumer pairs, T/2)
SET=(
  "xmalloc|xmalloc P 64 400" "pool|pool T 8192 1" "larson|larson T 4 2000 1000000"
  "transient|transient T 2000 1000" "mstress|mstress T 50 8" "rptest|rptest T 1000 500"
  "churn|churn T 1024 5"
)
for s in "${SET[@]}"; do
  name=${s%%|*}
  [ -n "${PROGRAMS:-}" ] && [[ " $PROGRAMS " != *" $name "* ]] && continue
  gcc -O2 -pthread -o "$OUT/$name" "bench/src/$name.c"
  cmd=${s#*|}; cmd=${cmd//P/$(( (T + 1) / 2 ))}; cmd=${cmd// T / $T }
  read -r -a argv <<< "$cmd"
  : > "$OUT/$name.txt"
  for _ in $(seq "$ROUNDS"); do
    for which in A B snmalloc; do
      case $which in A) so=$A ;; B) so=$B ;; *) so=$SN ;; esac
      LD_PRELOAD=$so /usr/bin/time -f "%M" -o "$OUT/time.txt" "$OUT/${argv[0]}" "${argv[@]:1}" > "$OUT/out.txt"
      secs=$(sed -n 's/.*secs=\([0-9.]*\).*/\1/p' "$OUT/out.txt")
      echo "$which $secs $(cat "$OUT/time.txt")" >> "$OUT/$name.txt"
    done
  done
  awk -v name="$name ($cmd)" '
    function median(arr, n,   i, j, t) {
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (arr[j] < arr[i]) { t = arr[i]; arr[i] = arr[j]; arr[j] = t }
      return n % 2 ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
    }
    { n[$1]++; w[$1, n[$1]] = $2; r[$1, n[$1]] = $3 }
    END {
      for (k in n) { for (i = 1; i <= n[k]; i++) { x[i] = w[k, i]; y[i] = r[k, i] } mw[k] = median(x, n[k]); mr[k] = median(y, n[k]) }
      printf "%-40s A %.3f s %.1f MiB | B/A time %.2f rss %.2f | snmalloc/A time %.2f rss %.2f\n", name,
        mw["A"], mr["A"] / 1024, mw["B"] / mw["A"], mr["B"] / mr["A"], mw["snmalloc"] / mw["A"], mr["snmalloc"] / mr["A"]
    }' "$OUT/$name.txt"
done
