#!/usr/bin/env bash
# The GPU check of ember's cuda device, for a lent GPU machine (its python3 has CuPy,
# torch with CUDA, NumPy and pytest). Run from the repository root; results go to $OUT.
# Each part has its own timeout inside tests/gpu/gpu_check.py; the whole run stays under
# 8 minutes. EMBER_GPU_DRYRUN=1 runs it on a machine without a GPU (CuPy test double).
set -u
OUT="${OUT:-gpu_out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
export OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-4}"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
timeout 470 "$PY" tests/gpu/gpu_check.py --out "$OUT" "$@"
rc=$?
cat "$OUT/summary.md" 2>/dev/null
exit $rc
