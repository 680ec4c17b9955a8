# Sourced by run targets and service files: pins OpenBLAS's thread count and,
# where Debian's OpenBLAS does not recognise the CPU, a kernel family that
# this CPU supports (generic fallback kernels are 1.5-2.3x slower).
: "${OPENBLAS_NUM_THREADS:=2}"
export OPENBLAS_NUM_THREADS
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  export OPENBLAS_CORETYPE=SkylakeX
elif [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
  export OPENBLAS_CORETYPE=Haswell
fi
