#!/usr/bin/env bash
# make soak: 60 s of mixed load (labels, batches, scoring, retrains,
# activations) against the real server with its memory, threads and open
# files sampled each second. LDPREF_SOAK_SECONDS changes the length,
# LDPREF_SOAK_CSV writes the samples, LDPREF_SOAK_ARGS adds server options.
set -eu
BUILD=${BUILD:-build}
export LDPREF_BUILD="$BUILD"
exec "$BUILD/bench/bench_soak" "$@"
