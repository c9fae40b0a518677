#!/usr/bin/env bash
# Runs bench/run.sh's benchmark programs under retype-malloc in its default and hardened modes
# and under the hardened allocators people deploy instead: GrapheneOS hardened_malloc (its
# default and light configurations, built from its sources), LLVM Scudo standalone (Debian's
# package) and mimalloc in secure mode (built from its sources), each through LD_PRELOAD,
# alternating allocators run by run; then runs tests/c/errors.c of retype-malloc-preload (one
# heap error of each kind on 8 B, 4 KiB and 1 MiB) under each of them. Writes its section of
# docs/hardening.md (time and peak RSS as ratios to hardened_malloc's; what each one catches).
#   bench/hardened.sh              bench/run.sh's set, 3 repetitions (REPS=1: about 13 minutes on 2 shared cores)
#   REPS=1 bench/hardened.sh       one repetition
#   QUICK=1 bench/hardened.sh      tiny parameters, 1 repetition (a smoke test of the script)
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${REPS:-3}
# The load averages as the run starts, for the report (which reads them again at the end).
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
export LOAD_START
OUT=target/bench/hardened
mkdir -p "$OUT"
source bench/allocators.sh
ALLOC[retype-hardened]=${ALLOC[retype]}
ALLOC[hardened_malloc]=$(bash bench/peers/hardened_malloc.sh)
ALLOC[hardened_malloc-light]=$(bash bench/peers/hardened_malloc.sh light)
ALLOC[scudo]=$(bash bench/peers/scudo.sh)
ALLOC[mimalloc-secure]=$(bash bench/peers/mimalloc_secure.sh)
ORDER=(hardened_malloc retype-hardened scudo mimalloc-secure retype hardened_malloc-light)
for f in bench/src/*.c; do gcc -O2 -pthread -o "$OUT/$(basename "$f" .c)" "$f"; done

# The benchmark set and run_one that bench/run.sh runs too.
source bench/programs.sh

CSV="$OUT/results.csv"
echo "bench,allocator,rep,wall_s,rss_kib,ops_per_s" > "$CSV"
for entry in "${SET[@]}"; do
  name=${entry%%|*}; cmd=${entry#*|}
  echo "== $name: $cmd" >&2
  for rep in $(seq "$REPS"); do
    # shellcheck disable=SC2086 # cmd is the program and its arguments
    # A run that fails (hardened_malloc: "out of memory" on the linked list) leaves an
    # empty row, which the report shows as failed, and the others go on.
    for alloc in "${ORDER[@]}"; do run_one "$name" "$alloc" "$rep" $cmd || echo "$name,$alloc,$rep,,," >> "$CSV"; done
  done
done

# What each allocator does with each heap error: the message it aborted with (addresses
# left out), SIGSEGV, or what the program printed last (see errors.c's header).
ERRORS=crates/retype-malloc-preload/tests/c/errors.c
gcc -O1 -g -pthread -o "$OUT/errors" "$ERRORS"
ulimit -c 0
outcome() { # alloc kind size
  local envs="" rc=0
  case $1 in
    retype-hardened) envs="RETYPE_MALLOC_HARDENED=1" ;;
    mimalloc-secure) envs="MIMALLOC_SHOW_ERRORS=1" ;; # its message, not only SIGABRT
  esac
  # shellcheck disable=SC2086 # envs is a list of assignments
  timeout 60 env $envs LD_PRELOAD="${ALLOC[$1]}" "$OUT/errors" "$2" "$3" >"$OUT/errors.out" 2>"$OUT/errors.err" || rc=$?
  case $rc in
    0) tail -n 1 "$OUT/errors.out" ;;
    124) echo "hung" ;;
    134) sed -E '/^\s*$/d; s/0x[0-9a-fA-F]+//g; s/ of pointer.*//; s/^retype-malloc: //; s/[ :,.]+$//' "$OUT/errors.err" |
      head -n 1 | grep . || echo "SIGABRT" ;;
    139) echo "SIGSEGV" ;;
    *) if [ "$rc" -gt 128 ]; then echo "signal $((rc - 128))"; else echo "exit $rc"; fi ;;
  esac
}
PEERS=(retype-hardened hardened_malloc hardened_malloc-light scudo mimalloc-secure)
TSV="$OUT/errors.tsv"
(IFS=$'\t'; echo "error	size	${PEERS[*]}") > "$TSV"
for kind in $(grep -o 'strcmp(what, "[a-z0-9-]*")' "$ERRORS" | cut -d'"' -f2); do
  for size in 8 4096 1048576; do
    row="$kind	$size"
    for alloc in "${PEERS[@]}"; do row="$row	$(outcome "$alloc" "$kind" "$size")"; done
    echo "$row" >> "$TSV"
  done
done

LIBS=(); for alloc in "${ORDER[@]}"; do LIBS+=("$alloc=${ALLOC[$alloc]}"); done
python3 bench/peers/report.py "$CSV" "$TSV" "$REPS" "${LIBS[@]}" > "$OUT/section.md"
# The section replaces the one an earlier run wrote (from its heading to the next "## ").
python3 - "$OUT/section.md" docs/hardening.md <<'PY'
import re, sys
section, doc = open(sys.argv[1]).read(), sys.argv[2]
text = open(doc).read()
head = section.splitlines()[0]
pattern = re.compile(re.escape(head) + r"\n.*?(?=^## |\Z)", re.S | re.M)
if pattern.search(text):
    text = pattern.sub(lambda _: section.rstrip("\n") + "\n\n", text)
else:
    text = text.rstrip("\n") + "\n\n" + section
open(doc, "w").write(text.rstrip("\n") + "\n")
PY
echo "wrote its section of docs/hardening.md" >&2
