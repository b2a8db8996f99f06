"""Accuracy on torch tensors numpy cannot hold (bfloat16, float8), requiring grad, on CPU and CUDA: exact results."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mmeval import Accuracy

INT64_MAX = 2**63 - 1
NARROW = [torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2]
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available: needs a GPU"),
        ],
    ),
]


def reference(scores: np.ndarray, labels: np.ndarray, k: int, thr) -> float:
    """Plain numpy top-k: stable descending order (ties -> lower class index), hit if in top-k and score > thr."""
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    hit = (order == labels[:, None]).any(axis=1)
    if thr is not None:
        hit &= scores[np.arange(len(labels)), labels] > thr
    return float(hit.mean())


def narrow_logits(dtype: torch.dtype, n: int = 300, c: int = 9, seed: int = 0):
    """Logits rounded to ``dtype`` (many ties and negative true scores), with their exact float64 values."""
    g = torch.Generator().manual_seed(seed)
    logits = (torch.randn(n, c, generator=g) * 3).to(dtype)
    labels = torch.randint(0, c, (n,), generator=g)
    return logits, labels, logits.float().double().numpy(), labels.numpy()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_narrow_float_scores_are_exact(dtype, device):
    logits, labels, exact, labs = narrow_logits(dtype)
    metric = Accuracy(topk=(1, 2, 5), thrs=(None, 0.0, 0.5))
    got = metric(logits.to(device), labels.to(device))
    for k in (1, 2, 5):
        for thr, suffix in ((None, "_no-thr"), (0.0, "_thr-0.00"), (0.5, "_thr-0.50")):
            assert got[f"top{k}{suffix}"] == reference(exact, labs, k, thr)  # exact: no tolerance


@pytest.mark.parametrize("device", DEVICES)
def test_scores_requiring_grad_and_parameters_are_accepted(device):
    logits, labels, exact, labs = narrow_logits(torch.bfloat16, seed=1)
    expected = {"top1": reference(exact, labs, 1, None), "top3": reference(exact, labs, 3, None)}
    grad = logits.to(device).requires_grad_()
    assert Accuracy(topk=(1, 3), thrs=None)(grad, labels.to(device)) == expected
    param = torch.nn.Parameter(logits.float().to(device))
    assert Accuracy(topk=(1, 3), thrs=None)(param, labels.to(device)) == expected
    assert Accuracy(topk=(1, 3), thrs=None)(list(grad), list(labels.to(device))) == expected


def test_accumulated_bf16_batches_equal_float32_ones_across_add_calls():
    logits, labels, _, _ = narrow_logits(torch.bfloat16, n=500, seed=2)
    narrow, wide = Accuracy(topk=(1, 5), thrs=None), Accuracy(topk=(1, 5), thrs=None)
    for part in range(0, 500, 128):
        narrow.add(logits[part : part + 128], labels[part : part + 128])
        wide.add(logits[part : part + 128].float(), labels[part : part + 128])
    assert narrow.compute() == wide.compute()
    assert narrow.num_results == wide.num_results == 500


def test_uint64_tensor_labels_beyond_int64_are_refused():
    big = torch.tensor([2**63 + 1, 0], dtype=torch.uint64)
    acc = Accuracy()
    with pytest.raises(ValueError, match=rf"labels\) out of range: got {2**63 + 1} at index 0; .*\[0, {INT64_MAX}\]"):
        acc.add(big, big)
    assert acc.num_results == 0


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_a_dtype_numpy_cannot_hold_names_the_argument():
    scores = torch.zeros(2, 3, dtype=torch.complex32)
    with pytest.raises(TypeError, match=r"predictions: cannot convert a Tensor of dtype torch.complex32"):
        Accuracy()(scores, torch.tensor([0, 1]))
