"""The image metrics' cases for the shared table (tests/metric_cases.py): image quality, matting, optical flow.

Small synthetic images (16 x 16; NIQE's 96 x 192, two of its blocks), made here from fixed seeds; each
metric's value is checked against an independent reference in tests/core/metrics/test_metric_image_quality.py.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

CASE_NAMES = (
    "MeanAbsoluteError-masks",
    "MeanSquaredError",
    "PeakSignalNoiseRatio-Y",
    "SignalNoiseRatio",
    "StructuralSimilarity",
    "SumAbsoluteDifferences",
    "MattingMeanSquaredError",
    "GradientError",
    "ConnectivityError",
    "EndPointError",
    "NaturalImageQualityEvaluator",
)

#: images per case (no world size of 2 or 3 divides it); NIQE's images are larger
N = 41
N_NIQE = 7


def image_pairs(n: int, shape: Any, seed: int) -> Any:
    """``n`` uint8 ground truths of ``shape`` (smooth gradients plus texture) and noisy predictions of them."""
    rng = np.random.default_rng(seed)
    h, w = shape[:2]
    ramp = np.add.outer(np.linspace(0, 160, h), np.linspace(0, 60, w))
    base = ramp.reshape((h, w) + (1,) * (len(shape) - 2)) + rng.integers(0, 80, (n, *shape))
    gts = np.clip(base, 0, 255).astype(np.uint8)
    noise = rng.normal(0, rng.uniform(2, 20, (n,) + (1,) * len(shape)), (n, *shape))
    preds = np.clip(np.round(gts + noise), 0, 255).astype(np.uint8)
    return preds, gts


def alpha_mattes(n: int, size: int, seed: int) -> Any:
    """``n`` alpha mattes in [0, 1] (a soft disc), predictions of them, and trimaps (0 / 128 / 255)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size]
    gts, preds, trimaps = [], [], []
    for _ in range(n):
        cy, cx, r = rng.uniform(4, size - 4), rng.uniform(4, size - 4), rng.uniform(3, size / 2)
        dist = np.hypot(yy - cy, xx - cx)
        gt = np.clip((r - dist) / 3 + 0.5, 0, 1)
        pred = np.clip(gt + rng.normal(0, 0.15, gt.shape) * (rng.random(gt.shape) < 0.5), 0, 1)
        trimap = np.where(gt >= 1, 255, np.where(gt <= 0, 0, 128)).astype(np.uint8)
        trimap[rng.random(gt.shape) < 0.1] = 128
        gts.append(gt)
        preds.append(np.where(trimap == 128, pred, gt))
        trimaps.append(trimap)
    return np.array(preds), np.array(gts), np.array(trimaps)


def flows(n: int, size: int, seed: int) -> Any:
    """``n`` flow maps (size, size, 2), predictions of them, and valid masks in [0, 1] (about 70 % >= 0.5)."""
    rng = np.random.default_rng(seed)
    labels = rng.normal(0, 3, (n, size, size, 2))
    preds = labels + rng.normal(0, 1, labels.shape)
    masks = np.clip(rng.random((n, size, size)) + 0.2, 0, 1)
    return preds, labels, masks


def niqe_params(seed: int = 5) -> Dict[str, np.ndarray]:
    """A synthetic pristine model of NIQE's shapes (the published one is not shipped): a mean of 36 plausible
    features, a positive-definite covariance and a normalised 7 x 7 Gaussian window."""
    rng = np.random.default_rng(seed)
    mu = np.tile([2.5, 0.6, 0.8, 0.0, 0.4, 0.4, 0.8, 0.0, 0.4, 0.4, 0.8, -0.05, 0.45, 0.4, 0.8, -0.05, 0.45, 0.4], 2)
    a = rng.normal(0, 0.1, (36, 36))
    x = np.arange(7) - 3.0
    g = np.exp(-x * x / (2 * (7 / 6) ** 2))
    window = np.outer(g, g) / np.outer(g, g).sum()
    return {
        "mu_pris_param": mu[None] + rng.normal(0, 0.05, (1, 36)),
        "cov_pris_param": a @ a.T + 0.01 * np.eye(36),
        "gaussian_window": window,
    }


def build_cases() -> Dict[str, Dict[str, Any]]:
    """Every image case: ``{"metric": "module:Class", "kwargs": {...}, "inputs": [...], "n": int}``."""
    preds, gts = image_pairs(N, (16, 16, 3), seed=1)
    masks = (np.random.default_rng(2).random((N, 16, 16, 1)) < 0.6) * 2.0
    chw_preds, chw_gts = image_pairs(N, (3, 16, 16), seed=3)
    pa, ga, tri = alpha_mattes(N, 16, seed=4)
    fp, fl, fm = flows(N, 8, seed=6)
    niqe_imgs, _ = image_pairs(N_NIQE, (96, 192, 3), seed=7)
    mattes = [pa, ga, tri]
    return {
        "MeanAbsoluteError-masks": {
            "metric": "mmeval.metrics.mae:MeanAbsoluteError",
            "kwargs": {},
            "inputs": [preds, gts, masks],
            "n": N,
        },
        "MeanSquaredError": {
            "metric": "mmeval.metrics.mse:MeanSquaredError",
            "kwargs": {},
            "inputs": [preds, gts],
            "n": N,
        },
        "PeakSignalNoiseRatio-Y": {
            "metric": "mmeval.metrics.psnr:PeakSignalNoiseRatio",
            "kwargs": {"crop_border": 2, "input_order": "HWC", "convert_to": "Y"},
            "inputs": [preds, gts],
            "n": N,
        },
        "SignalNoiseRatio": {
            "metric": "mmeval.metrics.snr:SignalNoiseRatio",
            "kwargs": {"crop_border": 1},
            "inputs": [chw_preds, chw_gts],
            "n": N,
        },
        "StructuralSimilarity": {
            "metric": "mmeval.metrics.ssim:StructuralSimilarity",
            "kwargs": {"input_order": "HWC"},
            "inputs": [preds, gts],
            "n": N,
        },
        "SumAbsoluteDifferences": {
            "metric": "mmeval.metrics.sad:SumAbsoluteDifferences",
            "kwargs": {},
            "inputs": [pa, ga],
            "n": N,
        },
        "MattingMeanSquaredError": {
            "metric": "mmeval.metrics.matting_mse:MattingMeanSquaredError",
            "kwargs": {},
            "inputs": mattes,
            "n": N,
        },
        "GradientError": {
            "metric": "mmeval.metrics.gradient_error:GradientError",
            "kwargs": {},
            "inputs": mattes,
            "n": N,
        },
        "ConnectivityError": {
            "metric": "mmeval.metrics.connectivity_error:ConnectivityError",
            "kwargs": {},
            "inputs": mattes,
            "n": N,
        },
        "EndPointError": {
            "metric": "mmeval.metrics.end_point_error:EndPointError",
            "kwargs": {},
            "inputs": [fp, fl, fm],
            "n": N,
        },
        "NaturalImageQualityEvaluator": {
            "metric": "mmeval.metrics.niqe:NaturalImageQualityEvaluator",
            "kwargs": {"input_order": "HWC", "pris_params": niqe_params()},
            "inputs": [niqe_imgs],
            "n": N_NIQE,
        },
    }
