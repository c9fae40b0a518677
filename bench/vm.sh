#!/usr/bin/env bash
# Seed 001 §3.6 beside raw Linux (docs/vm.md): Figure 3.2 (Appel and Li),
# Figure 3.3 (map, protect, unmap), Table 3.1 (RandomAccess GUPS) and
# Table 3.4 (GCBench, dirty bits against traps), JSON lines in
# target/bench/vm.jsonl.
#
# 2 MiB pages need the machine's cooperation: run as root and this script
# reserves HUGE_PAGES of them (vm.nr_hugepages) for the run, says so, and puts
# the old value back on exit; otherwise the 2 MiB rows are skipped with the
# reason. Usage: bench/vm.sh [MAX_MIB]   (default 1024: tables up to 1 GiB)
set -euo pipefail
cd "$(dirname "$0")/.."
max=${1:-1024}
# 2 MiB pages for two tables of MAX_MIB at once (ours and Linux), and slack.
need=$(( max + 8 ))
huge=${HUGE_PAGES:-$need}
cargo build --release -q -p retype-vm --examples
bin=${CARGO_TARGET_DIR:-target}/release/examples
out=target/bench/vm.jsonl
mkdir -p target/bench
if [ "$(id -u)" = 0 ]; then
  old=$(cat /proc/sys/vm/nr_hugepages)
  trap 'echo "$old" > /proc/sys/vm/nr_hugepages; echo "vm.nr_hugepages back to $old" >&2' EXIT
  echo "$huge" > /proc/sys/vm/nr_hugepages
  echo "reserved $(cat /proc/sys/vm/nr_hugepages) huge pages of 2 MiB for this run (was $old)" >&2
else
  echo "not root: no huge pages reserved; 2 MiB rows run only if some are free" >&2
fi
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
{
  "$bin/appel_li" 1000 100000 5
  "$bin/map_bench" "$max" 9
  "$bin/gups" "$max" $((1 << 24)) 3
  "$bin/gcbench" 5 3
} > "$out"
echo "wrote $out ($(wc -l < "$out") rows)" >&2
