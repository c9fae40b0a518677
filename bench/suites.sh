#!/usr/bin/env bash
# Runs other projects' test suites on glibc's malloc, on retype-malloc (LD_PRELOAD of
# libretype_malloc_preload.so) and on retype-malloc in hardened mode (RETYPE_MALLOC_HARDENED=1),
# and prints per suite and allocator the tests passed, failed and in error, then the tests that
# fail on retype-malloc but not on glibc (#46 point 3; results in docs/reliability.md).
#   bench/suites.sh                 numpy and sqlite, all three allocators
#   bench/suites.sh sqlite          one suite
#   ALLOCATORS="glibc retype" bench/suites.sh numpy
#   the slices of docs/reliability.md (a loaded 2-core machine; the whole suites take hours there):
#   SQLITE_SET="veryquick select% where% e_% window% func% trigger% insert% join% index% json%" \
#   NUMPY_TESTS="numpy.ma numpy.polynomial numpy.fft" PYTEST_ADDOPTS='-m "not slow"' bench/suites.sh
# The suites, installed by this script on a fresh Debian machine:
#   numpy   NumPy's own tests (pytest --pyargs numpy), from PyPI into target/suites/venv;
#           NUMPY_TESTS names the packages to test instead (numpy.linalg numpy.ma ...),
#           and pytest reads more arguments from PYTEST_ADDOPTS (-m "not slow", -k ...)
#   sqlite  SQLite's Tcl test suite from Debian's source package (apt-get source with a
#           deb-src list of this script's own, under target/suites/apt: the system's apt
#           configuration is left alone), its testfixture built against Tcl;
#           SQLITE_SET is the testrunner.tcl permutation and patterns (default: veryquick);
#           as root, the tests run as nobody
# Each run has SUITE_TIMEOUT seconds (default 3600). The exit column is the runner's status:
# 1 when a test failed, 124 when the time ran out, 128+N when signal N killed it; a SQLite
# test script that did not run to its end counts as one error.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=$ROOT/target/suites
mkdir -p "$OUT"
SUITES=("$@")
[ ${#SUITES[@]} -gt 0 ] || SUITES=(numpy sqlite)
read -r -a ALLOCATORS <<< "${ALLOCATORS:-glibc retype retype-hardened}"
SUITE_TIMEOUT=${SUITE_TIMEOUT:-3600}
NUMPY_VERSION=2.4.6
HYPOTHESIS_VERSION=6.170.17
PYTEST_VERSION=9.2.0

cargo build --release -q -p retype-malloc-preload
LIB=$ROOT/target/release/libretype_malloc_preload.so

# Runs "$@" on allocator $ALLOC (nice'd: these are long runs); its exit status is returned.
on_allocator() {
  case $ALLOC in
    glibc) env -u LD_PRELOAD nice "$@" ;;
    retype) env LD_PRELOAD="$LIB" nice "$@" ;;
    retype-hardened) env LD_PRELOAD="$LIB" RETYPE_MALLOC_HARDENED=1 nice "$@" ;;
  esac
}

numpy_setup() {
  bash scripts/install-deps python3 python3-venv
  local venv=$OUT/venv
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q "numpy==$NUMPY_VERSION" "pytest==$PYTEST_VERSION" \
    "hypothesis==$HYPOTHESIS_VERSION"
}

numpy_run() { # dir
  local dir=$1 py=$OUT/venv/bin/python numpy_dir
  numpy_dir=$("$py" -c 'import numpy, os; print(os.path.dirname(numpy.__file__))')
  # f2py's tests compile Fortran with meson: neither is part of this run.
  # shellcheck disable=SC2086 # NUMPY_TESTS is a list
  (cd "$dir" && on_allocator timeout "$SUITE_TIMEOUT" "$py" -m pytest --pyargs ${NUMPY_TESTS:-numpy} -q \
    -p no:cacheprovider --ignore="$numpy_dir/f2py" --junitxml="$dir/junit.xml" \
    > "$dir/log" 2>&1)
}

# Writes $dir/results.tsv: one line per test, "id<TAB>outcome" (passed, failed, error, skipped).
numpy_results() { # dir
  python3 - "$1/junit.xml" > "$1/results.tsv" <<'PY'
import sys, xml.etree.ElementTree as ET
for case in ET.parse(sys.argv[1]).iter("testcase"):
    kinds = {child.tag for child in case}
    outcome = ("failed" if "failure" in kinds else "error" if "error" in kinds
               else "skipped" if "skipped" in kinds else "passed")
    print(f"{case.get('classname')}::{case.get('name')}\t{outcome}")
PY
}

SQLITE_BUILD=$OUT/src/sqlite-build

sqlite_setup() {
  bash scripts/install-deps dpkg-dev tcl-dev zlib1g-dev gcc make python3
  if ! compgen -G "$OUT/src/sqlite3-*/" > /dev/null; then
    # A deb-src list and apt state of our own, so that the system's apt setup stays as it is.
    local apt=$OUT/apt
    mkdir -p "$apt/parts" "$apt/lists/partial" "$apt/cache/archives/partial" "$OUT/src"
    : > "$apt/none.list"
    cat > "$apt/parts/debian-src.sources" <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $(. /etc/os-release && echo "$VERSION_CODENAME")
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    local opts=(-o "Dir::Etc::SourceList=$apt/none.list" -o "Dir::Etc::SourceParts=$apt/parts"
      -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Debug::NoLocking=1)
    apt-get -qq "${opts[@]}" update
    (cd "$OUT/src" && apt-get -qq "${opts[@]}" source sqlite3)
  fi
  SQLITE_SRC=$(echo "$OUT"/src/sqlite3-*/)
  SQLITE_SRC=${SQLITE_SRC%/}
  if [ ! -x "$SQLITE_BUILD/testfixture" ]; then
    mkdir -p "$SQLITE_BUILD"
    (cd "$SQLITE_BUILD" && nice "$SQLITE_SRC/configure" --with-tcl=/usr/lib/tcl8.6 > configure.log &&
      nice make -j2 testfixture > make.log)
  fi
}

# testrunner.tcl runs each test script of the set and keeps its errors and output in
# testrunner.db; a script that did not finish (its process crashed or hung) stays 'running'.
sqlite_run() { # dir
  local dir=$1
  # shellcheck disable=SC2086 # SQLITE_SET is a permutation and patterns
  local as=()
  if [ "$(id -u)" -eq 0 ]; then
    # attach.test stops the whole run when root can read a file it made unreadable.
    chown nobody "$dir"
    as=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
  fi
  (cd "$dir" && on_allocator "${as[@]}" timeout "$SUITE_TIMEOUT" "$SQLITE_BUILD/testfixture" \
    "$SQLITE_SRC/test/testrunner.tcl" --jobs 1 ${SQLITE_SET:-veryquick} > "$dir/log" 2>&1)
}

# One line per failed test, named as tester.tcl prints it, one line per script for its passed
# tests (with their count), and one error for a script that did not finish.
sqlite_results() { # dir
  python3 - "$1/testrunner.db" > "$1/results.tsv" <<'PY'
import re, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for config, filename, state, nerr, ntest, output in db.execute(
        "SELECT config, filename, state, nerr, ntest, output FROM script ORDER BY 1, 2"):
    script = f"{config}:{filename.rsplit('/', 1)[-1]}"
    if state != "done":
        print(f"{script}\terror")
        continue
    # tester.tcl's do_test prints "! NAME expected: ..." or "NAME...\nError: ...".
    names = re.findall(r"^! (\S+) expected:|^(\S+)\.\.\.\s*\nError:", output or "", re.M)
    names = sorted({a or b for a, b in names})
    for name in names:
        print(f"{script}:{name}\tfailed")
    unnamed = (nerr or 0) - len(names)
    for i in range(max(unnamed, 0)):
        print(f"{script}:unnamed-{i + 1}\tfailed")
    print(f"{script}:passed\tpassed\t{(ntest or 0) - (nerr or 0)}")
PY
}

for suite in "${SUITES[@]}"; do
  declare -F "${suite}_setup" > /dev/null || { echo "bench/suites.sh: no suite $suite (numpy, sqlite)" >&2; exit 2; }
done
for ALLOC in "${ALLOCATORS[@]}"; do
  case $ALLOC in glibc | retype | retype-hardened) ;;
    *) echo "bench/suites.sh: no allocator $ALLOC (glibc, retype, retype-hardened)" >&2; exit 2 ;;
  esac
done

# Each suite's rows and new failures go to its own folder, so that suites may run at once from
# two invocations; the end prints those of this one's suites.
for suite in "${SUITES[@]}"; do
  "${suite}_setup"
  : > "$OUT/$suite.rows"
  : > "$OUT/$suite.new"
  for ALLOC in "${ALLOCATORS[@]}"; do
    dir=$OUT/$suite/$ALLOC
    rm -rf "$dir" && mkdir -p "$dir"
    echo "== $suite on $ALLOC ($dir/log)" >&2
    start=$(date +%s)
    rc=0; "${suite}_run" "$dir" || rc=$?
    wall=$(( $(date +%s) - start ))
    "${suite}_results" "$dir" || true
    # results.tsv: id, outcome and, for a line that stands for several passed tests, their count.
    counts=$(awk -F'\t' '{n = ($3 == "" ? 1 : $3); c[$2] += n}
      END {printf "%d | %d | %d | %d", c["passed"], c["failed"], c["error"], c["skipped"]}' "$dir/results.tsv")
    echo "| $suite | $ALLOC | $counts | $rc | $wall |" >> "$OUT/$suite.rows"
    if [ "$ALLOC" != glibc ] && [ -f "$OUT/$suite/glibc/results.tsv" ]; then
      # Failures and errors here that glibc's run does not show.
      awk -F'\t' -v tag="$suite on $ALLOC" 'NR == FNR { if ($2 == "failed" || $2 == "error") bad[$1] = 1; next }
        ($2 == "failed" || $2 == "error") && !($1 in bad) { print tag ": " $1 " " $2 }' \
        "$OUT/$suite/glibc/results.tsv" "$dir/results.tsv" >> "$OUT/$suite.new"
    fi
  done
done
echo "| suite | allocator | passed | failed | errors | skipped | exit | wall s |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for suite in "${SUITES[@]}"; do cat "$OUT/$suite.rows"; done
echo
new=$(for suite in "${SUITES[@]}"; do cat "$OUT/$suite.new"; done)
if [ -n "$new" ]; then
  echo "Failures not shown under glibc:"
  echo "$new"
else
  echo "No failure that glibc does not also show."
fi
