#!/usr/bin/env bash
# On a GPU machine: the GPU tests, then the GPU benchmark (scripts/bench.py --device cuda).
#
#   bash scripts/gpu_check.sh [scripts/bench.py arguments...]
#
# Python packages the machine lacks (hydra-core, omegaconf, antlr4, quadprog, ...) are taken
# from .whl/ when it exists (wheels made on a machine with network: see README, "GPU") and
# installed into /tmp/site, on PYTHONPATH. The machine's own torch is used: print its version.
# Results: stdout, and under $OUT (default ./gpu_check_out): pytest log, bench-stream.{json,log,md}.
# TEST_TIMEOUT, BENCH_TIMEOUT (seconds) bound the two parts.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
PY=${PY:-python3}
if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "error: installing .whl/ failed"; exit 1; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 DATA_DIR=${DATA_DIR:-.data}

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv || true
$PY - <<'EOF'
import platform, torch, lightning, hydra, omegaconf, numpy
print(f"python {platform.python_version()}  torch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
      f"{torch.backends.cudnn.version()})  lightning {lightning.__version__}  hydra {hydra.__version__}  "
      f"omegaconf {omegaconf.__version__}  numpy {numpy.__version__}")
print("cuda available:", torch.cuda.is_available(), "|", torch.cuda.get_device_name() if torch.cuda.is_available() else "-")
EOF

echo "== GPU tests (pytest -m gpu; a skip here is a failure)"
timeout "${TEST_TIMEOUT:-600}" $PY -m pytest -m gpu -p no:cacheprovider -q -rs --durations=0 tests/lab/test_gpu.py 2>&1 \
  | tee "$OUT/pytest_gpu.log"
test_rc=${PIPESTATUS[0]}
if grep -q "^SKIPPED" "$OUT/pytest_gpu.log"; then echo "error: GPU tests were skipped"; test_rc=1; fi

echo "== benchmark"
timeout "${BENCH_TIMEOUT:-3600}" $PY scripts/bench.py --device cuda --out "$OUT" "$@"
bench_rc=$?
echo "== exit: tests $test_rc, bench $bench_rc"
exit $((test_rc || bench_rc))
