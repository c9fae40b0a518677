#!/usr/bin/env bash
# Seed 001 §3.6 beside raw Linux (docs/vm.md): Figure 3.2 (Appel and Li),
# Figure 3.3 (map, protect, unmap), Table 3.1 (RandomAccess GUPS) and
# Table 3.4 (GCBench, dirty bits against traps), JSON lines in
# target/bench/vm.jsonl.
#
# Huge pages need the machine's cooperation: run as root and this script
# reserves HUGE_PAGES of 2 MiB (vm.nr_hugepages), and what it can of the 1 GiB
# pages RandomAccess needs, for the run, says so, and puts the old values back
# on exit; otherwise those rows are skipped with the reason. Usage: bench/vm.sh [MAX_MIB]   (default 1024: tables up to 1 GiB)
set -euo pipefail
cd "$(dirname "$0")/.."
max=${1:-1024}
# 2 MiB pages for two buffers of MAX_MIB at once (map, protect, unmap keeps
# ours and Linux), and slack.
need=$(( max + 8 ))
huge=${HUGE_PAGES:-$need}
cargo build --release -q -p retype
bin=${CARGO_TARGET_DIR:-target}/release
out=target/bench/vm.jsonl
mkdir -p target/bench
gig=/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages
if [ "$(id -u)" = 0 ]; then
  old=$(cat /proc/sys/vm/nr_hugepages)
  old_gig=$(cat "$gig" 2>/dev/null || echo 0)
  trap 'echo "$old" > /proc/sys/vm/nr_hugepages; [ -e "$gig" ] && echo "$old_gig" > "$gig"; echo "huge page pools back to $old (2 MiB) and $old_gig (1 GiB)" >&2' EXIT
  echo "$huge" > /proc/sys/vm/nr_hugepages
  echo "reserved $(cat /proc/sys/vm/nr_hugepages) huge pages of 2 MiB for this run (was $old)" >&2
  # 1 GiB pages for RandomAccess: one table of MAX_MIB (it holds one at a
  # time) and one for our root page table, if the kernel finds them.
  if [ -e "$gig" ] && [ "$max" -ge 1024 ]; then
    echo $(( max / 1024 + 1 )) > "$gig" || true
    echo "reserved $(cat "$gig") huge pages of 1 GiB (was $old_gig)" >&2
  fi
else
  echo "not root: no huge pages reserved; 2 MiB rows run only if some are free" >&2
fi
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
{
  "$bin/retype" bench vm --json --only appel --reps 5
  "$bin/retype" bench vm --json --only mpu --max-mib "$max" --reps 9
  "$bin/retype" bench vm --json --only gups --max-mib "$max" --updates $((1 << 24))
  "$bin/retype" bench vm --json --only gc --gc-max 5
} > "$out"
echo "wrote $out ($(wc -l < "$out") rows)" >&2
