#!/usr/bin/env bash
# Runs the Python binding's tests (pytest with Debian's /usr/bin/python3:
# a pyenv shim may shadow python3) against $LDPREF_BUILD (default build)
# and closes with "N passed, N failed" for tests/run.sh. Skipped tests
# (the datasets library is not in Debian) are listed, not counted.
set -u
cd "$(dirname "$0")/../.."
export LDPREF_BUILD=${LDPREF_BUILD:-build}
export PYTHONDONTWRITEBYTECODE=1
PY=/usr/bin/python3
# A sanitizer build's libldpref.so needs the ASan and UBSan runtimes loaded
# before anything else in the (uninstrumented) interpreter.
if ldd "$LDPREF_BUILD/libldpref.so" 2>/dev/null | grep -q libasan; then
  cc=${CC:-cc}
  export LD_PRELOAD="$($cc -print-file-name=libasan.so) $($cc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
fi
out=$("$PY" -m pytest -q -rs -p no:cacheprovider tests/python 2>&1); rc=$?
printf '%s\n' "$out"
last=$(printf '%s\n' "$out" | grep -E '(passed|failed|error)' | tail -n 1)
count() { grep -oE "[0-9]+ $1" <<<"$last" | awk '{s += $1} END {print s + 0}'; }
passed=$(count passed)
failed=$(( $(count failed) + $(count error) ))
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
