#!/usr/bin/env bash
# The CUDA checks in one run, for a machine with a GPU (issue 36): the torch plugin's CUDA tests
# (torch_cuda over NCCL at world size 1, gloo ranks sharing the GPU, a cpu:gloo,cuda:nccl group,
# bf16/fp16 CUDA logits, CUDA tensors rebuilt on the receiver's device, the conformance kit on
# torch_cuda, the shared metric table with CUDA tensors in add()) and benchmarks/gpu.py's ratios.
#
#   bash tools/gpu_check.sh OUT_DIR [WHEEL_DIR]
#
# WHEEL_DIR (optional): wheels to install first into a private target (mmeval-core, mmeval-torch
# and the extras the metric table needs: pycocotools, shapely, nltk) on a machine with no index.
# Writes OUT_DIR/{env.txt,pytest.log,junit.xml,gpu.json,gpu.md,bench.log}; exits non-zero if a step failed.
set -uo pipefail
out=${1:?usage: gpu_check.sh OUT_DIR [WHEEL_DIR]}
wheels=${2:-}
cd "$(dirname "$0")/.."
mkdir -p "$out"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
if [ -n "$wheels" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/mmeval-site \
        "$wheels"/*.whl || exit 3
    export PYTHONPATH=/tmp/mmeval-site${PYTHONPATH:+:$PYTHONPATH}
fi
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c 'import torch, numpy, mmeval, mmeval_torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
        "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count(), "numpy", numpy.__version__,
        "mmeval", mmeval.__file__)'
} >"$out/env.txt" 2>&1
cat "$out/env.txt"
status=0
# every test that has a CUDA path: the torch_cuda parameters of the shared suites and test_torch_cuda.py
timeout 330 python3 -m pytest -q -rs -p no:cacheprovider --junitxml="$out/junit.xml" \
    tests/torch/test_torch_cuda.py tests/torch/test_torch_collectives.py tests/torch/test_torch_reductions.py \
    tests/torch/test_torch_plugin.py tests/torch/test_torch_accuracy_inputs.py -k "cuda or nccl or gpu" \
    2>&1 | tee "$out/pytest.log" | tail -40 || status=1
timeout 120 python3 benchmarks/gpu.py --out "$out" 2>&1 | tee "$out/bench.log" || status=1
exit $status
