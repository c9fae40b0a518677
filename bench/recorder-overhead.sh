#!/usr/bin/env bash
# The recorder's overhead: wall time of malloc-heavy programs with
# libretype_recorder.so preloaded, beside the same programs without it.
# Runs alternate (plain, recorded, plain, recorded, ...) so that machine noise
# hits both sides alike; prints the median of each and their ratio.
# Usage: bench/recorder-overhead.sh [ROUNDS]   (after cargo build --release)
# With BASELINE_SO=path/to/an/older/libretype_recorder.so, each round also runs
# that library (plain, recorded, baseline, ...) and a last column gives its ratio,
# so that two versions of the recorder are compared inside one run.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
so=$PWD/target/release/libretype_recorder.so
base=${BASELINE_SO:-}
[ -f "$so" ] || { echo "build first: cargo build --release -p retype-recorder" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -pthread -o "$work/mt_alloc" crates/retype-recorder/tests/c/mt_alloc.c
python3 -c "
import random; random.seed(7)
open('$work/lines.txt','w').write(''.join('%016x %s\n' % (random.getrandbits(64), 'z' * random.randrange(40)) for _ in range(300000)))"
py=$(python3 -c 'import sys; print(sys.executable)')

# One workload: NAME then the command.
run() {
  local name=$1; shift
  local plain=() rec=() old=()
  for _ in $(seq "$rounds"); do
    local t0 t1 t2 t3
    t0=$(date +%s%N); "$@" >/dev/null; t1=$(date +%s%N)
    RETYPE_TRACE_FILE="$work/t.rtr" LD_PRELOAD="$so" "$@" >/dev/null; t2=$(date +%s%N)
    plain+=($(( (t1 - t0) / 1000 ))); rec+=($(( (t2 - t1) / 1000 )))
    events=$(ls -l "$work"/t.rtr* | awk '{s += $5} END {print s}')
    rm -f "$work"/t.rtr*
    if [ -n "$base" ]; then
      RETYPE_TRACE_FILE="$work/t.rtr" LD_PRELOAD="$base" "$@" >/dev/null; t3=$(date +%s%N)
      old+=($(( (t3 - t2) / 1000 )))
      rm -f "$work"/t.rtr*
    fi
  done
  python3 - "$name" "$events" "${plain[*]}" "${rec[*]}" "${old[*]}" <<'PY'
import statistics, sys
name, size = sys.argv[1], int(sys.argv[2])
plain, rec, old = (list(map(int, a.split())) for a in sys.argv[3:6])
p, r = statistics.median(plain), statistics.median(rec)
ratios = sorted(b / a for a, b in zip(plain, rec))
row = f"| {name} | {p/1000:.1f} | {r/1000:.1f} | {r/p:.2f} | {ratios[0]:.2f}–{ratios[-1]:.2f} | {size/1e6:.1f} |"
if old:
    row += f" {statistics.median(old)/p:.2f} |"
print(row)
PY
}

if [ -n "$base" ]; then
  echo "| workload | plain ms (median) | recorded ms (median) | ratio of medians | ratio range | trace MB | baseline ratio of medians |"
  echo "|---|---|---|---|---|---|---|"
else
  echo "| workload | plain ms (median) | recorded ms (median) | ratio of medians | ratio range | trace MB |"
  echo "|---|---|---|---|---|---|"
fi
run "mt_alloc 1 thread, 1M iterations (1.9M calls)" "$work/mt_alloc" 1 1000000
run "mt_alloc 2 threads, 500k iterations each" "$work/mt_alloc" 2 500000
run "python3 json dumps/loads of 200k ints ×5" "$py" -c "
import json
for _ in range(5): json.loads(json.dumps([{'k': i, 'v': str(i)} for i in range(200000)]))"
run "python3 json, PYTHONMALLOC=malloc (every object through malloc)" env PYTHONMALLOC=malloc "$py" -c "
import json
for _ in range(2): json.loads(json.dumps([{'k': i, 'v': str(i)} for i in range(100000)]))"
run "sort 300k lines" sort --parallel=1 -o "$work/out.txt" "$work/lines.txt"
