#!/usr/bin/env bash
# make bench-audit: the audit log's append latency and rate beside a one-row
# write of the same store, and the verification walk, on a durable database.
set -eu
BUILD=${BUILD:-build}
exec "$BUILD/bench/bench_audit" "$@"
