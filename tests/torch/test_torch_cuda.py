"""Tensors in ``add()`` and CUDA tensors through the collectives, in real processes.

Every case of the shared metric table (tests/metric_cases.py) is fed torch tensors -- each numeric
numpy input turned into a tensor -- and must give the numpy inputs' one-process answer under every
sharding:

- CPU tensors on two gloo ranks (runs everywhere);
- CUDA tensors on ``torch_cuda`` over NCCL at world size 1 (one GPU: NCCL refuses two ranks on one
  device), and on two gloo ranks sharing the GPU (``torch_cpu`` moving CUDA tensors).

Objects holding CUDA tensors (bf16, fp16, bool, strided, 0-d, empty, requires_grad) come back on the
receiver's current device; bf16 / fp16 CUDA logits give the float32 answer of the same values; a
``cpu:gloo,cuda:nccl`` group serves both backends. The CUDA tests skip, saying why, where CUDA or a
GPU is absent.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List

import pytest

torch = pytest.importorskip("torch")

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (TESTS, os.path.join(TESTS, "torch")):  # metric_cases, _tensor_metrics (the ranks inherit sys.path)
    if _path not in sys.path:
        sys.path.insert(0, _path)

import metric_cases  # noqa: E402
from _torch_groups import cuda_skip_reason  # noqa: E402
from _torch_workers import Ranks, values  # noqa: E402

needs_cuda = pytest.mark.skipif(cuda_skip_reason(1) is not None, reason=str(cuda_skip_reason(1)))

#: (kind, world size, worker env, tensor device) of each group the table runs on
TABLE_GROUPS = {
    "cpu-tensors-gloo-ws2": ("torch_cpu", 2, {}, "cpu"),
    "cuda-tensors-nccl-ws1": ("torch_cuda", 1, {}, "cuda"),
    "cuda-tensors-gloo-ws2-one-gpu": ("torch_cpu", 2, {"TEST_TORCH_CUDA_DEVICE": "0"}, "cuda"),
}
_reports: Dict[str, List[Dict[str, Any]]] = {}


@pytest.fixture(scope="module")
def payload_path(tmp_path_factory: Any) -> str:
    path = str(tmp_path_factory.mktemp("table") / "payload.pkl")
    metric_cases.write_payload(path)
    return path


def table_reports(group: str, payload_path: str) -> List[Dict[str, Any]]:
    """Every rank's report of the table on ``group`` (one launch per group, on first use)."""
    if group not in _reports:
        kind, ws, env, device = TABLE_GROUPS[group]
        with Ranks(ws, kind, env=env) as ranks:
            _reports[group] = values(ranks.run("metric_table_on_tensors", payload_path, device, timeout=600.0))
    return _reports[group]


def _table_param(group: str) -> Any:
    marks = [needs_cuda] if TABLE_GROUPS[group][3] == "cuda" else []
    return pytest.param(group, marks=marks, id=group)


@pytest.mark.parametrize("case", metric_cases.CASE_NAMES)
@pytest.mark.parametrize("group", [_table_param(g) for g in TABLE_GROUPS])
def test_metric_table_with_tensor_inputs(group: str, case: str, payload_path: str) -> None:
    problems = metric_cases.case_failures(table_reports(group, payload_path), case)
    assert not problems, f"{group}:\n" + "\n".join(problems)


@needs_cuda
@pytest.mark.parametrize(
    "kind,ws,env",
    [("torch_cuda", 1, {}), ("torch_cpu", 2, {"TEST_TORCH_CUDA_DEVICE": "0"})],
    ids=["nccl-ws1", "gloo-ws2-one-gpu"],
)
def test_cuda_tensors_in_objects_come_back_on_the_receivers_device(kind: str, ws: int, env: Dict[str, str]) -> None:
    with Ranks(ws, kind, env=env) as ranks:
        assert values(ranks.run("cuda_objects")) == [{"gathered": ws}] * ws


@needs_cuda
def test_bf16_and_fp16_cuda_logits_give_the_float32_answer() -> None:
    with Ranks(1, "torch_cuda") as ranks:
        (report,) = values(ranks.run("half_precision_logits"))
    for dtype, (got, want) in report.items():
        assert got == want, dtype


@needs_cuda
def test_a_cpu_gloo_cuda_nccl_group_serves_both_backends() -> None:
    with Ranks(1, "torch_cuda", env={"TEST_TORCH_PG_BACKEND": "cpu:gloo,cuda:nccl"}) as ranks:
        (report,) = values(ranks.run("mixed_group"))
    assert report["auto"] == "torch_cuda", report
    assert report["TorchCPUDist"] == report["TorchCUDADist"], report


@needs_cuda
def test_torch_cuda_reduces_natively_over_nccl() -> None:
    with Ranks(1, "torch_cuda") as ranks:
        (report,) = values(ranks.run("native_reductions"))
    assert report.pop("byte_calls") == [], "a large reduction went through the byte gather, not NCCL's all_reduce"
    assert report.pop("reduce") is True
    assert all(report.values()), {k: v for k, v in report.items() if not v}


def test_torch_cpu_reduces_natively_with_the_same_check() -> None:
    """The CUDA check above, on gloo: so that the check itself runs (and can fail) on every machine."""
    with Ranks(2, "torch_cpu") as ranks:
        reports = values(ranks.run("native_reductions"))
    for report in reports:
        assert report.pop("byte_calls") == []
        assert all(v is not False for v in report.values()), report
