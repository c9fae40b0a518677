#!/usr/bin/env bash
# The recorder's overhead: wall time of malloc-heavy programs with
# libretype_recorder.so preloaded, with call stacks (the default, 32 frames)
# and without (RETYPE_STACK_DEPTH=0), an aggregate recording with stacks
# (RETYPE_AGGREGATE=1, as `retype record --aggregate`), beside the same
# programs run plainly, under Debian's heaptrack (which records a stack per
# call too) and, for the Python programs, under memray with native stacks
# (`memray run --native`, from PyPI).
# Runs alternate (plain, no stacks, stacks, aggregate, heaptrack, memray,
# plain, ...) so that machine noise hits every side alike; prints the median
# of each, their ratios to plain, the range of the stacks ratio, and the
# recordings' sizes.
# Usage: bench/recorder-overhead.sh [ROUNDS]   (after cargo build --release)
# With BASELINE_SO=path/to/an/older/libretype_recorder.so, each round also runs
# that library and a last column gives its ratio, so that two versions of the
# recorder are compared inside one run.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
so=$PWD/target/release/libretype_recorder.so
base=${BASELINE_SO:-}
[ -f "$so" ] || { echo "build first: cargo build --release -p retype-recorder" >&2; exit 2; }
bash scripts/install-deps heaptrack pip:memray >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -pthread -o "$work/mt_alloc" crates/retype-recorder/tests/c/mt_alloc.c
python3 -c "
import random; random.seed(7)
open('$work/lines.txt','w').write(''.join('%016x %s\n' % (random.getrandbits(64), 'z' * random.randrange(40)) for _ in range(300000)))"
py=$(python3 -c 'import sys; print(sys.executable)')

# Microseconds since the epoch.
now() { echo $(( $(date +%s%N) / 1000 )); }
# Bytes of the files matching a glob, then removes them.
size_of() { local s; s=$(cat "$@" 2>/dev/null | wc -c); rm -f "$@"; echo "$s"; }

# One workload: NAME then the command.
run() {
  local name=$1; shift
  local plain=() bare=() stacks=() agg=() heap=() mem=() old=() t0 t1 rtr=0 ht=0 mr=0
  for _ in $(seq "$rounds"); do
    t0=$(now); "$@" >/dev/null; t1=$(now); plain+=($((t1 - t0)))
    t0=$(now); RETYPE_STACK_DEPTH=0 RETYPE_TRACE_FILE="$work/t.rtr" LD_PRELOAD="$so" "$@" >/dev/null; t1=$(now)
    bare+=($((t1 - t0))); rm -f "$work"/t.rtr*
    t0=$(now); RETYPE_TRACE_FILE="$work/t.rtr" LD_PRELOAD="$so" "$@" >/dev/null; t1=$(now)
    stacks+=($((t1 - t0))); rtr=$(size_of "$work"/t.rtr*)
    t0=$(now); heaptrack -o "$work/h" "$@" >/dev/null 2>&1; t1=$(now)
    heap+=($((t1 - t0))); ht=$(size_of "$work"/h*)
    t0=$(now); RETYPE_AGGREGATE=1 RETYPE_TRACE_FILE="$work/t.rtr" LD_PRELOAD="$so" "$@" >/dev/null; t1=$(now)
    agg+=($((t1 - t0))); rm -f "$work"/t.rtr*
    if [ "$1" = "$py" ] && [ "$2" = "-c" ]; then
      t0=$(now); "$py" -m memray run --native -q -f -o "$work/m.bin" -c "$3" >/dev/null; t1=$(now)
      mem+=($((t1 - t0))); mr=$(size_of "$work"/m.bin*)
    fi
    if [ -n "$base" ]; then
      t0=$(now); RETYPE_TRACE_FILE="$work/t.rtr" LD_PRELOAD="$base" "$@" >/dev/null; t1=$(now)
      old+=($((t1 - t0))); rm -f "$work"/t.rtr*
    fi
  done
  python3 - "$name" "$rtr" "$ht" "$mr" "${plain[*]}" "${bare[*]}" "${stacks[*]}" "${agg[*]}" "${heap[*]}" "${mem[*]}" "${old[*]}" <<'PY'
import statistics, sys
name, rtr, ht, mr = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
plain, bare, stacks, agg, heap, mem, old = (list(map(int, a.split())) for a in sys.argv[5:12])
m = statistics.median
p = m(plain)
ratios = sorted(b / a for a, b in zip(plain, stacks))
side = lambda t: f"{m(t)/1000:.1f} ({m(t)/p:.2f})" if t else "-"
row = (f"| {name} | {p/1000:.1f} | {side(bare)} | {side(stacks)} "
       f"| {ratios[0]:.2f}–{ratios[-1]:.2f} | {side(agg)} | {side(heap)} | {side(mem)} | {rtr/1e6:.1f} | {ht/1e6:.1f} | "
       + (f"{mr/1e6:.1f} |" if mem else "- |"))
if old:
    row += f" {m(old)/p:.2f} |"
print(row, flush=True)
PY
}

head="| workload | plain ms | no stacks ms (ratio) | stacks ms (ratio) | stacks ratio range | aggregate ms (ratio) | heaptrack ms (ratio) | memray --native ms (ratio) | trace MB | heaptrack MB | memray MB |"
rule="|---|---|---|---|---|---|---|---|---|---|---|"
if [ -n "$base" ]; then head="$head baseline ratio |"; rule="$rule---|"; fi
echo "load at start: $(uptime)"
echo
echo "$head"
echo "$rule"
run "mt_alloc 1 thread, 1M iterations (1.9M calls)" "$work/mt_alloc" 1 1000000
run "mt_alloc 2 threads, 500k iterations each" "$work/mt_alloc" 2 500000
run "python3 json dumps/loads of 200k ints ×5" "$py" -c "
import json
for _ in range(5): json.loads(json.dumps([{'k': i, 'v': str(i)} for i in range(200000)]))"
# Exported rather than passed by `env`, which heaptrack would record instead.
export PYTHONMALLOC=malloc
run "python3 json, PYTHONMALLOC=malloc (every object through malloc)" "$py" -c "
import json
for _ in range(2): json.loads(json.dumps([{'k': i, 'v': str(i)} for i in range(100000)]))"
unset PYTHONMALLOC
run "sort 300k lines" sort --parallel=1 -o "$work/out.txt" "$work/lines.txt"
echo
echo "load at end: $(uptime)"
