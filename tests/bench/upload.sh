#!/usr/bin/env bash
# make bench-upload: one task upload of 2,000, 8,000 and 32,000 tasks
# through a real server, on SQLite and on PostgreSQL.
set -eu
BUILD=${BUILD:-build}
export LDPREF_BUILD="$BUILD"
exec "$BUILD/bench/bench_upload" "$@"
