#!/usr/bin/env bash
# make bench-migrate: ldpref-server --migrate-to on a SQLite database of 10^6
# labels into a private PostgreSQL, beside pg_dump/pg_restore of the same rows.
set -eu
BUILD=${BUILD:-build}
export LDPREF_BUILD="$BUILD"
exec "$BUILD/bench/bench_migrate" "$@"
