#!/usr/bin/env bash
# Runs every test binary under $BUILD (unit, end-to-end, fuzz-corpus replay)
# and the installed-layout test (tests/install/run.sh),
# prints each binary's own summary, and closes with the total
# "N passed, N failed" line. Exit status is non-zero if anything failed.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
export LDPREF_BUILD="$BUILD"
total_pass=0 total_fail=0
run_one() {
  local name=$1; shift
  local out rc
  out=$("$@" 2>&1); rc=$?
  local line
  line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -n 1)
  if [ -z "$line" ]; then
    printf '%s\n' "$out" | tail -n 30
    echo "[$name] no summary line (exit $rc): counted as 1 failure"
    total_fail=$((total_fail + 1)); return
  fi
  local p f
  p=$(echo "$line" | awk '{print $1}'); f=$(echo "$line" | awk '{print $3}')
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  [ "$f" -ne 0 ] && printf '%s\n' "$out" | grep -v '^[0-9]* passed' | tail -n 40
  echo "[$name] $p passed, $f failed"
  total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
}
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] && run_one "$(basename "$t")" "$t"
done
for t in "$BUILD"/tests/replay_fuzz_*; do
  [ -x "$t" ] || continue
  n=$(basename "$t"); n=${n#replay_fuzz_}
  run_one "replay $n" "$t" "tests/fuzz/corpus/$n"
done
for t in "$BUILD"/tests/e2e_*; do
  [ -x "$t" ] && run_one "$(basename "$t")" "$t"
done
# The end-to-end suites again with every server on PostgreSQL
# (LDPREF_TEST_DB=postgresql: a private cluster per binary, a database per
# server; tests/support/server_proc.h). LDPREF_TEST_PG=0 leaves the pass out,
# =1 runs it; by default it runs where PostgreSQL is installed (required
# under CI=true), in the plain and the sanitizer build alike.
pg_pass=${LDPREF_TEST_PG:-auto}
if [ "$pg_pass" = auto ]; then
  pg_pass=1
  if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && [ -z "${LDPREF_PG_BIN:-}" ] \
       && [ "${CI:-}" != true ]; then
    pg_pass=0; echo "SKIP [postgresql] the e2e pass: PostgreSQL is not installed"
  fi
fi
if [ "$pg_pass" = 1 ]; then
  for t in "$BUILD"/tests/e2e_*; do
    [ -x "$t" ] && run_one "$(basename "$t") [postgresql]" env LDPREF_TEST_DB=postgresql "$t"
  done
fi
# The installed layout: make install into a temporary prefix, the
# docs/client.md C blocks, pkg-config, the manual pages.
run_one "install" tests/install/run.sh
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
