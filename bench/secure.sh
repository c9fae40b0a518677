#!/usr/bin/env bash
# The cost of retype-malloc's secure mode (RETYPE_MALLOC_SECURE=1) against its default mode:
# bench/run.sh's programs under both, alternated run by run (default, secure, default, ...);
# prints a Markdown table of each program's median wall time and peak RSS, secure as a ratio to
# default, and their geomeans (the figures in docs/hardening.md, "Secure mode").
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
  done
done

python3 - "$CSV" <<'PY'
import csv, math, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
names = list(dict.fromkeys(r["bench"] for r in rows))
def med(name, alloc, key):
    return statistics.median(float(r[key]) for r in rows if r["bench"] == name and r["allocator"] == alloc)
print("| program | default (s) | secure / default time | default (MiB) | secure / default peak RSS |")
print("|---|---|---|---|---|")
t, m = [], []
for n in names:
    dt, st = med(n, "retype", "wall_s"), med(n, "retype-secure", "wall_s")
    dm, sm = med(n, "retype", "rss_kib"), med(n, "retype-secure", "rss_kib")
    t.append(st / dt); m.append(sm / dm)
    print(f"| {n} | {dt:.3f} | {st / dt:.2f} | {dm / 1024:.1f} | {sm / dm:.2f} |")
g = lambda v: math.exp(sum(map(math.log, v)) / len(v))
print(f"| **geomean** | | **{g(t):.2f}** | | **{g(m):.2f}** |")
PY
