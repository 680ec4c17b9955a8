#!/usr/bin/env bash
# tests/bench/train.sh — `make bench-train`: the training benchmark.
# n = 10^6 labels x d = 256 dense float32 features, square-chipo, 2 threads.
# The C side (bench_train) generates the data in memory, measures the read
# bandwidth, one loss+gradient evaluation (the fused kernel at every
# instruction-set level the CPU runs: AVX-512, AVX2+FMA, portable C; and
# the BLAS kernel), 100 L-BFGS iterations and peak memory; the NumPy/SciPy peer (Debian's
# /usr/bin/python3) runs the same objective on the same data, with and
# without deploy/openblas-env.sh's OPENBLAS_CORETYPE so its effect is
# measured. Prints "BENCH <name> <value> <unit>" lines, the CPU model and
# its vector flags. Not a test.
#
#   BENCH_TRAIN_ROUNDS=41 make bench-train  more paired rounds (default 21)
#   BENCH_TRAIN_SIMD=avx2 make bench-train   one level only, and the fit
#                                            with it (auto|avx512|avx2|none)
set -euo pipefail
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
N=${BENCH_TRAIN_N:-1000000}
D=${BENCH_TRAIN_D:-256}
DIR=$(mktemp -d /dev/shm/ldpref-bench.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$DIR"' EXIT
export OPENBLAS_NUM_THREADS=2
SIMD=${BENCH_TRAIN_SIMD:-auto}
OUT="$DIR/bench.out"
echo "# n=$N d=$D threads=2 simd=$SIMD data in $DIR"
echo "# cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo "# cpu vector flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' \
  | grep -E '^(sse4_2|avx|avx2|fma|f16c|avx512.*)$' | tr '\n' ' ')"
{
  # Without the OpenBLAS core type override first (the BLAS kernel only).
  env -u OPENBLAS_CORETYPE "$BUILD/bench/bench_train" --simd "$SIMD" "$N" "$D" "$DIR" 2 \
    | sed -n 's/^BENCH train_eval_blas /BENCH train_eval_blas_no_coretype /p'
  . deploy/openblas-env.sh
  echo "# OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset} (from deploy/openblas-env.sh)"
  "$BUILD/bench/bench_train" --simd "$SIMD" "$N" "$D" "$DIR" 2
  if /usr/bin/python3 -c 'import numpy, scipy' 2>/dev/null; then
    /usr/bin/python3 tests/bench/peer_train.py "$DIR" numpy_coretype
    env -u OPENBLAS_CORETYPE /usr/bin/python3 tests/bench/peer_train.py "$DIR" numpy_no_coretype
  else
    echo "# numpy/scipy not installed for /usr/bin/python3: peer skipped"
  fi
  if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
    echo "# torch is installed but no torch peer is implemented"
  else
    echo "# python3-torch not installed: no PyTorch peer"
  fi
} | tee "$OUT"
# Side-by-side ratios from this run: the fused evaluation (at each level)
# against the fastest peer evaluation (best of 7 each; and median against
# the lowest peer median), and the C fit's 100
# iterations against the fastest peer's time to reach the same objective.
awk '
  $1 == "BENCH" { v[$2] = $3 }
  $1 == "BENCH" && $2 ~ /^numpy_.*_eval$/ && (pe == "" || $3 < pe) { pe = $3; pn = $2 }
  $1 == "BENCH" && $2 ~ /^numpy_.*_eval_median$/ && (pm == "" || $3 < pm) { pm = $3 }
  $1 == "BENCH" && $2 ~ /^numpy_.*_time_to_c_objective$/ && $3 != "nan" && (pr == "" || $3 < pr) { pr = $3 }
  END {
    if (pe != "" && v["train_eval_fused"] > 0)
      printf "# fastest peer evaluation: %s\nBENCH train_eval_speedup_vs_fastest_peer %.2f x\n", pn, pe / v["train_eval_fused"]
    split("avx512 avx2 none", lv, " ")
    for (k = 1; k <= 3; k++)
      if (pe != "" && v["train_eval_fused_" lv[k]] > 0)
        printf "BENCH train_eval_fused_%s_speedup_vs_fastest_peer %.2f x\n", lv[k], pe / v["train_eval_fused_" lv[k]]
    for (k = 1; k <= 3; k++)
      if (pm != "" && v["train_eval_fused_" lv[k] "_median"] > 0)
        printf "BENCH train_eval_fused_%s_speedup_vs_fastest_peer_median %.2f x\n", lv[k], pm / v["train_eval_fused_" lv[k] "_median"]
    if (pr != "" && v["train_lbfgs100_time"] > 0)
      printf "BENCH train_fit_speedup_vs_fastest_peer_to_same_objective %.2f x\n", pr / v["train_lbfgs100_time"]
  }' "$OUT"
