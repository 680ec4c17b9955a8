#!/usr/bin/env bash
# make bench-ingest: end-to-end ingest throughput and latency against the real
# server with a durable database, beside the raw Ed25519 verification rate.
#
# make bench-ingest DB=postgresql: in the same run, the same measurement on
# SQLite (one server: the lines as without DB), then on a private PostgreSQL
# with one server (lines "BENCH pg1_...") and with two servers on the one
# database, the load spread over both (lines "BENCH pg2_...").
set -euo pipefail
BUILD=${BUILD:-build}
export LDPREF_BUILD="$BUILD"
if [ "${DB:-sqlite}" != postgresql ]; then
  exec "$BUILD/bench/bench_ingest" "$@"
fi
"$BUILD/bench/bench_ingest" "$@"
for n in 1 2; do
  "$BUILD/bench/bench_ingest" --db postgresql --servers "$n" "$@" | sed "s/^BENCH /BENCH pg${n}_/"
done
