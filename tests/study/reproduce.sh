#!/usr/bin/env bash
# tests/study/reproduce.sh — `make reproduce`: the privacy/robustness study.
#
#   make reproduce           full grid -> docs/results/ (README.md, SVG plots,
#                            sweep.jsonl.gz, gp/*.gp, oasst_cv.md, verdicts.json)
#   make reproduce QUICK=1   reduced grid -> $BUILD/study-quick/ (never docs/); its
#                            report says, per verdict, whether it agrees with the
#                            committed full report's (docs/results/verdicts.json)
#
# Steps: `ldpref-train sweep` (simulate, fit, evaluate in-process on JOBS
# worker threads), `ldpref-train general-study` (general preferences),
# `ldpref-train userlevel-study` (user-level privacy: RR at eps/m vs AUP-RLHF),
# `ldpref-train central-study` (the exponential mechanism, central vs local),
# `ldpref-train pessimism-study` (pessimistic scores),
# `ldpref-train cv` on the OASST pairs (full run only; the
# pairs ship in tests/data/oasst-en100/), `ldpref-train report` (tables,
# verdicts, gnuplot scripts), then gnuplot draws the SVGs. Needs gnuplot
# (gnuplot-nox).
# Environment: BUILD (default build), QUICK (0/1), OUT (output directory),
# JOBS (worker threads, default 2), OASST (the pairs file).
# The same study against live servers is `make reproduce-live`
# (tests/study/live.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
QUICK=${QUICK:-0}
JOBS=${JOBS:-2}
OASST=${OASST:-tests/data/oasst-en100/en_100.pairs.jsonl}
TRAIN="$BUILD/ldpref-train"

if [ "$QUICK" = 1 ]; then
  OUT=${OUT:-$BUILD/study-quick}; GRID=quick; PGRID=quick; SEEDS=4; CMD="make reproduce QUICK=1"
else
  OUT=${OUT:-docs/results}; GRID=default; PGRID=full; SEEDS=5; CMD="make reproduce"
fi
command -v gnuplot >/dev/null || {
  echo "reproduce: gnuplot not found (deploy/install-deps.sh installs gnuplot-nox)" >&2; exit 1; }
[ -x "$TRAIN" ] || { echo "reproduce: $TRAIN not built (run make)" >&2; exit 1; }
mkdir -p "$OUT"
rm -rf "$OUT/gp" "$OUT"/*.svg "$OUT/sweep.jsonl" "$OUT/sweep.jsonl.gz"

now() { date +%s.%N; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
load0=$(load)
t0=$(now)
rows=$("$TRAIN" sweep --grid "$GRID" --seeds "$SEEDS" --count)
echo "reproduce: grid '$GRID', $SEEDS seeds, $rows fits, $JOBS worker threads -> $OUT" >&2
"$TRAIN" sweep --grid "$GRID" --seeds "$SEEDS" --jobs "$JOBS" --out "$OUT/sweep.jsonl" --progress
echo "reproduce: general preferences (Algorithm 3 vs Square chi-PO on cyclic data)" >&2
"$TRAIN" general-study --grid "$GRID" --out "$OUT/general.jsonl"
echo "reproduce: user-level privacy (RR at eps/m vs AUP-RLHF)" >&2
"$TRAIN" userlevel-study --grid "$GRID" --out "$OUT/userlevel.jsonl"
echo "reproduce: central DP (the exponential mechanism; central vs local)" >&2
"$TRAIN" central-study --grid "$GRID" --out "$OUT/central.jsonl"
echo "reproduce: pessimistic scores (lower confidence bounds vs greedy choice)" >&2
"$TRAIN" pessimism-study --grid "$PGRID" --out "$OUT/pessimism.jsonl"
t1=$(now)

CV=()
if [ "$QUICK" != 1 ] && [ -r "$OASST" ]; then
  echo "reproduce: OASST 5-fold cv" >&2
  "$TRAIN" cv --data "$OASST" --seeds 3 --l2 1 --eps 0.5,1,inf > "$OUT/oasst_cv.md"
  CV=(--cv-table "$OUT/oasst_cv.md")
fi
t2=$(now)

sweep_s=$(awk "BEGIN { print $t1 - $t0 }")
total_s=$(awk "BEGIN { print $t2 - $t0 }")
machine="Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')); load average (1, 5, 15 min) $load0 at the start and $(load) at the end — the cores were shared with other builds, so the wall time is pessimistic."
NAME=sweep.jsonl
[ "$QUICK" != 1 ] && NAME=sweep.jsonl.gz
[ "$QUICK" = 1 ] && [ -r docs/results/verdicts.json ] && CV+=(--compare docs/results/verdicts.json)
"$TRAIN" report --in "$OUT/sweep.jsonl" --dir "$OUT" --name "$NAME" "${CV[@]}" \
  --general "$OUT/general.jsonl" --central "$OUT/central.jsonl" --pessimism "$OUT/pessimism.jsonl" \
  --userlevel "$OUT/userlevel.jsonl" \
  --command "$CMD" --sweep-seconds "$sweep_s" --total-seconds "$total_s" --machine "$machine"
(cd "$OUT" && for g in gp/*.gp; do gnuplot "$g"; done)
# The full run's JSONL is committed compressed (gzip -n: no name or time, so
# the same data give the same bytes).
[ "$QUICK" != 1 ] && gzip -9nf "$OUT/sweep.jsonl"
echo "reproduce: done in $(awk "BEGIN { printf \"%.0f\", $(now) - $t0 }") s; report $OUT/README.md" >&2
