#!/usr/bin/env bash
# Written in session 37 before this run (~2 min; any card). From the repo root, carry .deps (with
# .deps/pylib: pytest, pip-installed there on the CPU machine, for a device without it):
#   O=/tmp/o6 timeout 300 bash bench/results/2026-12-05-session37/session37_python.sh; tar czf $OUT/o6.tgz -C /tmp/o6 .
# 1. The Python binding's tests with torch (CPU and CUDA tensors) after the session's binding fixes:
#    the CPU machine has no torch, so the torch paths of those fixes (host-routing checks, expert_map
#    values, the cache's replacement of a stale packing) run here first. Prediction: all pass.
# 2. The quantiser cases of the suite, with the quick shape added this session (2200 x 1040), against
#    the shipped 16-wide form (it ran only against the reverted one, call 4). Prediction: all pass.
set -u
. tools/device_call.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > $O/gpu.txt 2>&1
build_device
python3 -c "import torch, numpy; print(torch.__version__, numpy.__version__, torch.cuda.is_available())" \
  > $O/versions.txt 2>&1
MOEFUSE_LIB=$R/build-device/libmoefuse.so PYTHONPATH=python:.deps/pylib timeout 200 \
  python3 -m pytest -q -rs python/tests > $O/pytest.log 2>&1
mark "pytest python/tests (torch)" $? $O/pytest.log
timeout 60 $T --quick --gemm hopper --filter fp8 > $O/suite_quick_fp8.log 2>&1
mark "suite --quick --filter fp8" $? $O/suite_quick_fp8.log
mark done 0 /dev/null
