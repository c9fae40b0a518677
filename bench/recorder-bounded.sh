#!/usr/bin/env bash
# Bounded recordings against a full one: wall time and file size of
# crates/retype-recorder/tests/c/bounded.c making CALLS malloc-family calls
# (default 100 M), run plainly, recorded in full, aggregate
# (RETYPE_AGGREGATE=1, a snapshot every 100 ms) and sampled
# (RETYPE_SAMPLE_BYTES=1000000, seed 1), all with call stacks (32 frames),
# alternating for ROUNDS rounds (default 1); medians, their ratios to plain,
# the files' sizes, and each top site's sampled estimate of bytes against the
# aggregate recording's exact count (which is the full recording's).
# Usage: bench/recorder-bounded.sh [ROUNDS] [CALLS]   (after cargo build --release -p retype -p retype-recorder)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-1}
calls=${2:-100000000}
so=$PWD/target/release/libretype_recorder.so
retype=$PWD/target/release/retype
[ -f "$so" ] && [ -x "$retype" ] || { echo "build first: cargo build --release -p retype -p retype-recorder" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -g -o "$work/bounded" crates/retype-recorder/tests/c/bounded.c
prog=("$work/bounded" "$calls")

now() { echo $(( $(date +%s%N) / 1000 )); }
plain=() full=() agg=() smp=()
for _ in $(seq "$rounds"); do
  t0=$(now); "${prog[@]}"; t1=$(now); plain+=($((t1 - t0)))
  rm -f "$work"/f.rtr*
  t0=$(now); RETYPE_TRACE_FILE="$work/f.rtr" LD_PRELOAD="$so" "${prog[@]}"; t1=$(now); full+=($((t1 - t0)))
  fsize=$(stat -c %s "$work/f.rtr"); rm -f "$work"/f.rtr*
  rm -f "$work"/a.rtr*
  t0=$(now); RETYPE_AGGREGATE=1 RETYPE_TRACE_FILE="$work/a.rtr" LD_PRELOAD="$so" "${prog[@]}"; t1=$(now); agg+=($((t1 - t0)))
  asize=$(stat -c %s "$work/a.rtr")
  rm -f "$work"/s.rtr*
  t0=$(now); RETYPE_SAMPLE_BYTES=1000000 RETYPE_SAMPLE_SEED=1 RETYPE_TRACE_FILE="$work/s.rtr" LD_PRELOAD="$so" "${prog[@]}"; t1=$(now); smp+=($((t1 - t0)))
  ssize=$(stat -c %s "$work/s.rtr")
done
"$retype" trace sites "$work/a.rtr" --json --top 0 > "$work/a.json"
"$retype" trace sites "$work/s.rtr" --json --top 0 > "$work/s.json"
python3 - "$calls" "$fsize" "$asize" "$ssize" "${plain[*]}" "${full[*]}" "${agg[*]}" "${smp[*]}" "$work/a.json" "$work/s.json" <<'PY'
import json, statistics, sys
calls, fsize, asize, ssize = map(int, sys.argv[1:5])
plain, full, agg, smp = (list(map(int, a.split())) for a in sys.argv[5:9])
exact, sampled = (json.load(open(p)) for p in sys.argv[9:11])
m = statistics.median
p = m(plain)
print(f"| recording | ms (ratio to plain {p/1000:.0f} ms) | file bytes |")
print("|---|---|---|")
for name, t, size in [("full", full, fsize), ("aggregate", agg, asize), ("sampled, 1 MB", smp, ssize)]:
    print(f"| {name} | {m(t)/1000:.0f} ({m(t)/p:.2f}) | {size:,} |")
print()
est = {s["site"]: s["bytes_allocated"] for s in sampled["sites"]}
print("| site | bytes (exact) | sampled estimate | error |")
print("|---|---|---|---|")
for s in exact["sites"][:5]:
    e = est.get(s["site"], 0)
    b = s["bytes_allocated"]
    print(f"| {s['site']} | {b:,} | {e:,} | {100 * (e - b) / b:+.2f} % |")
print(f"\n{calls:,} calls asked; {exact['total']['calls']:,} allocations counted by the aggregate recording")
PY
