"""Gradient error of alpha mattes (MMEval's ``GradientError``), in numpy."""

from __future__ import annotations

import math
from typing import Any, ClassVar, Dict, Tuple

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..core.errors import MetricArgumentError
from ..core.inputs import FINITE, FloatInput
from ._per_image import MeanOfImageScores, alpha_triples, check_positive

__all__ = ["GradientError", "gauss_gradient", "gaussian_derivative_taps"]


def gaussian_derivative_taps(sigma: float, epsilon: float = 1e-2) -> Tuple[np.ndarray, np.ndarray]:
    """The two 1-D taps of the first-derivative-of-Gaussian filter: the Gaussian and its derivative.

    ``half = ceil(sigma * sqrt(-2 ln(sqrt(2 pi) sigma epsilon)))`` taps each side (the taps where the
    Gaussian exceeds ``epsilon`` times its peak, rounded up). Both are scaled so that their outer
    product, the 2-D filter, has unit L2 norm (as the MATLAB ``gaussgradient`` code normalises it).
    """
    half = math.ceil(sigma * math.sqrt(-2.0 * math.log(math.sqrt(2.0 * math.pi) * sigma * epsilon)))
    x = np.arange(-half, half + 1, dtype=np.float64)
    gauss = np.exp(-x * x / (2.0 * sigma * sigma)) / (sigma * math.sqrt(2.0 * math.pi))
    deriv = -x * gauss / (sigma * sigma)
    return gauss / np.linalg.norm(gauss), deriv / np.linalg.norm(deriv)


def _correlate_replicate(img: np.ndarray, taps: np.ndarray, axis: int) -> np.ndarray:
    """``img`` correlated with the 1-D ``taps`` along ``axis``, borders replicated (same size out)."""
    half = taps.size // 2
    pad = [(0, 0)] * img.ndim
    pad[axis] = (half, half)
    return np.asarray(sliding_window_view(np.pad(img, pad, mode="edge"), taps.size, axis=axis) @ taps)


def gauss_gradient(img: np.ndarray, sigma: float) -> np.ndarray:
    """The gradient magnitude of a 2-D ``img`` by first-derivative-of-Gaussian filters (replicated borders)."""
    gauss, deriv = gaussian_derivative_taps(sigma)
    gx = _correlate_replicate(_correlate_replicate(img, gauss, 0), deriv, 1)
    gy = _correlate_replicate(_correlate_replicate(img, deriv, 0), gauss, 1)
    return np.asarray(np.sqrt(gx * gx + gy * gy))


def _min_max(img: np.ndarray) -> np.ndarray:
    """``img`` scaled to [0, 1] by its minimum and maximum (all 0 when it is constant)."""
    lo, hi = float(img.min()), float(img.max())
    return (img - lo) / (hi - lo) if hi > lo else np.zeros_like(img)


class GradientError(MeanOfImageScores):
    """``sum over unknown pixels of (|grad gt| - |grad pred|)^2 / norm_const`` per matte, averaged over mattes.

    Each alpha matte is first scaled to [0, 1] by its own minimum and maximum;
    its gradient magnitude comes from first-derivative-of-Gaussian filters of
    standard deviation ``sigma`` (borders replicated); the unknown pixels are
    those where the trimap is 128.

    Args:
        sigma: the filters' standard deviation (default 1.4).
        norm_const: the divisor that keeps the numbers small (default 1000).
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(pred_alphas, gt_alphas, trimaps)``: sequences of 2-D mattes, the
    three of one shape per matte. Computed in float64, in numpy: MMEval 0.2.1
    (OpenCV) kept the inputs' dtype, so its uint8 mattes were rounded to 0 / 1
    after the scaling and their gradients to integers; for float mattes the two
    agree to rounding. Result key ``gradient_error``.

    A state metric: the sum of the mattes' scores and their count move,
    whatever the number of mattes.

    Units: ``gradient_error`` is a sum of squared gradient differences divided by ``norm_const``, as MMEval
    0.2.1's.
    """

    #: what each float argument of add() accepts, checked by the core at every add() (mmeval.core.inputs)
    float_inputs: ClassVar[Dict[str, FloatInput]] = {"pred_alphas": FINITE, "gt_alphas": FINITE, "trimaps": FINITE}

    KEY = "gradient_error"

    def __init__(self, sigma: float = 1.4, norm_const: float = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_positive(self.name, "sigma", sigma)
        check_positive(self.name, "norm_const", norm_const)
        self.sigma = sigma
        self.norm_const = norm_const

    def add(self, pred_alphas: Any, gt_alphas: Any, trimaps: Any) -> None:
        """Add a batch; see the class docstring. Keeps nothing of a batch it refuses."""
        triples = alpha_triples(self.name, pred_alphas, gt_alphas, trimaps)
        scores = []
        for i, (pred, gt, unknown) in enumerate(triples):
            if pred.ndim != 2:
                raise MetricArgumentError(
                    f"GradientError.add(): matte {i} must be 2-D (H, W), got shape {pred.shape}: an array is read "
                    f"as a batch along its first axis, so one (H, W) matte is H one-row mattes; to add one matte, "
                    f"pass lists: add([pred_alpha], [gt_alpha], [trimap])"
                )
            diff = gauss_gradient(_min_max(gt), float(self.sigma)) - gauss_gradient(_min_max(pred), float(self.sigma))
            scores.append(float((diff * diff * unknown).sum()) / float(self.norm_const))
        self._add_scores(scores)
