#!/usr/bin/env bash
# The cost of retype-malloc's secure mode (RETYPE_MALLOC_SECURE=1) against its default mode,
# beside what mimalloc's secure mode costs mimalloc (both built from one source by
# bench/peers/mimalloc_secure.sh): bench/run.sh's programs under the four, alternated run by
# run; prints a Markdown table of each program's median wall time and peak RSS, each secure
# mode as a ratio to its own default, and their geomeans (the figures in docs/hardening.md,
# "Secure mode").
#   bench/secure.sh            bench/run.sh's set, 1 repetition (about 2 minutes on 2 cores)
#   REPS=3 bench/secure.sh     more repetitions
#   QUICK=1 bench/secure.sh    tiny parameters (a smoke test of the script)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-1}
OUT=target/bench/secure
mkdir -p "$OUT"
cargo build -q -p retype-malloc-preload --release
declare -A ALLOC=(
  [retype]="${CARGO_TARGET_DIR:-$PWD/target}/release/libretype_malloc_preload.so"
)
ALLOC[retype-secure]=${ALLOC[retype]}
ALLOC[mimalloc]=$(bash bench/peers/mimalloc_secure.sh plain)
ALLOC[mimalloc-secure]=$(bash bench/peers/mimalloc_secure.sh)
for f in bench/src/*.c; do gcc -O2 -pthread -o "$OUT/$(basename "$f" .c)" "$f"; done

# The benchmark set and run_one that bench/run.sh runs too.
source bench/programs.sh
[ "${QUICK:-0}" = 1 ] || REPS=${REPS:-1}

CSV="$OUT/results.csv"
echo "bench,allocator,rep,wall_s,rss_kib,ops_per_s" > "$CSV"
for entry in "${SET[@]}"; do
  name=${entry%%|*}; cmd=${entry#*|}
  echo "== $name: $cmd" >&2
  for rep in $(seq "$REPS"); do
    # shellcheck disable=SC2086 # cmd is the program and its arguments
    run_one "$name" retype "$rep" $cmd
    # shellcheck disable=SC2086
    ENVS="RETYPE_MALLOC_SECURE=1" run_one "$name" retype-secure "$rep" $cmd
    # shellcheck disable=SC2086
    run_one "$name" mimalloc "$rep" $cmd
    # shellcheck disable=SC2086
    run_one "$name" mimalloc-secure "$rep" $cmd
  done
done

python3 - "$CSV" <<'PY'
import csv, math, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
names = list(dict.fromkeys(r["bench"] for r in rows))
def med(name, alloc, key):
    return statistics.median(float(r[key]) for r in rows if r["bench"] == name and r["allocator"] == alloc)
print("| program | default (s) | secure / default time | default (MiB) | secure / default peak RSS | mimalloc (s) | its secure / plain time | its secure / plain peak RSS |")
print("|---|---|---|---|---|---|---|---|")
cols = [[] for _ in range(4)]
for n in names:
    dt, st = med(n, "retype", "wall_s"), med(n, "retype-secure", "wall_s")
    dm, sm = med(n, "retype", "rss_kib"), med(n, "retype-secure", "rss_kib")
    mt, mst = med(n, "mimalloc", "wall_s"), med(n, "mimalloc-secure", "wall_s")
    mm, msm = med(n, "mimalloc", "rss_kib"), med(n, "mimalloc-secure", "rss_kib")
    for c, v in zip(cols, (st / dt, sm / dm, mst / mt, msm / mm)):
        c.append(v)
    print(f"| {n} | {dt:.3f} | {st / dt:.2f} | {dm / 1024:.1f} | {sm / dm:.2f} | {mt:.3f} | {mst / mt:.2f} | {msm / mm:.2f} |")
g = lambda v: math.exp(sum(map(math.log, v)) / len(v))
print(f"| **geomean** | | **{g(cols[0]):.2f}** | | **{g(cols[1]):.2f}** | | **{g(cols[2]):.2f}** | **{g(cols[3]):.2f}** |")
PY
