#!/usr/bin/env bash
# make reproduce-live: the live-service variant of the privacy/robustness
# study. Real ldpref-server processes on 127.0.0.1, a few hundred simulated
# annotators through the real libldpref, retraining over HTTP, and the
# served models evaluated against the known theta*, compared with the
# offline pipeline at the same settings (tests/study/live_study.c).
# Writes docs/results/live.md (and prints it); exits non-zero when a live
# number disagrees with the offline ones beyond sampling error.
# Extra arguments go to live_study (--annotators, --tasks, --workers,
# --seeds, --seed, --out).
set -eu
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
export LDPREF_BUILD="$BUILD"
if [ -f deploy/openblas-env.sh ]; then . deploy/openblas-env.sh; fi
mkdir -p docs/results
start=$(date +%s)
rc=0
"$BUILD/study/live_study" --out docs/results/live.md "$@" || rc=$?
echo "reproduce-live: $(( $(date +%s) - start )) s, exit $rc" >&2
exit "$rc"
