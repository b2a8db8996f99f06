"""Connectivity error of alpha mattes (MMEval's ``ConnectivityError``)."""

from __future__ import annotations

from typing import Any, ClassVar, Dict

import numpy as np

from ..core.errors import MetricArgumentError
from ..core.inputs import FINITE, FloatInput
from ._per_image import MeanOfImageScores, alpha_triples, check_positive
from .extras import import_extra

__all__ = ["ConnectivityError", "connectivity_levels"]


def connectivity_levels(pred: np.ndarray, gt: np.ndarray, step: float) -> np.ndarray:
    """Per pixel, the last threshold at which it was still connected to the source region (Rhemann et al., 2009).

    Thresholds ``t_k = k * step`` (``numpy.arange(0, 1 + step, step)``); for each ``t_k`` (k >= 1)
    the source region is the largest 4-connected component of ``gt >= t_k and pred >= t_k`` (the
    first found in raster order among equally large ones). A pixel outside it for the first time at
    ``t_k`` gets ``t_{k-1}``; a pixel inside at every threshold gets 1. Needs scipy (the ``scipy``
    extra) for the connected components.
    """
    ndimage = import_extra("scipy.ndimage", "ConnectivityError")
    thresholds = np.arange(0, 1 + step, step)
    level = np.full(gt.shape, -1.0)
    for k in range(1, len(thresholds)):
        inter = (gt >= thresholds[k]) & (pred >= thresholds[k])
        labels, count = ndimage.label(inter)
        source = np.zeros(gt.shape, bool)
        if count:
            sizes = np.bincount(labels.reshape(-1), minlength=count + 1)[1:]
            source = labels == int(np.argmax(sizes)) + 1
        level[(level == -1) & ~source] = thresholds[k - 1]
    level[level == -1] = 1.0
    return level


class ConnectivityError(MeanOfImageScores):
    """``sum over unknown pixels of |phi(gt) - phi(pred)| / norm_const`` per matte, averaged over mattes.

    ``phi(a) = 1 - d * [d >= 0.15]`` with ``d = a - l``, ``l`` the pixel's
    connectivity level (:func:`connectivity_levels`, thresholds every
    ``step``); the unknown pixels are those where the trimap is 128. Alphas
    are expected in [0, 1] (the thresholds run from 0 to 1).

    Args:
        step: the threshold step (default 0.1).
        norm_const: the divisor that keeps the numbers small (default 1000).
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(pred_alphas, gt_alphas, trimaps)``: sequences of mattes, the three of
    one shape per matte. Computed in float64 (MMEval 0.2.1 kept the inputs'
    dtype: with uint8 mattes its level map, initialised to -1, wrapped to 255).
    Needs scipy (``pip install 'mmeval-core[scipy]'``; MMEval used OpenCV's
    connected components: the same 4-connected components, labelled in the
    same raster order). Result key ``connectivity_error``.

    A state metric: the sum of the mattes' scores and their count move,
    whatever the number of mattes.

    Units: ``connectivity_error`` is a sum of per-pixel differences divided by ``norm_const``, as MMEval
    0.2.1's.
    """

    #: what each float argument of add() accepts, checked by the core at every add() (mmeval.core.inputs)
    float_inputs: ClassVar[Dict[str, FloatInput]] = {"pred_alphas": FINITE, "gt_alphas": FINITE, "trimaps": FINITE}

    KEY = "connectivity_error"

    def __init__(self, step: float = 0.1, norm_const: float = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if check_positive(self.name, "step", step) > 1:
            raise MetricArgumentError(f"ConnectivityError: step must be in (0, 1], got {step!r}")
        check_positive(self.name, "norm_const", norm_const)
        self.step = step
        self.norm_const = norm_const

    def add(self, pred_alphas: Any, gt_alphas: Any, trimaps: Any) -> None:
        """Add a batch; see the class docstring. Keeps nothing of a batch it refuses."""
        scores = []
        for pred, gt, unknown in alpha_triples(self.name, pred_alphas, gt_alphas, trimaps):
            level = connectivity_levels(pred, gt, float(self.step))
            d_gt, d_pred = gt - level, pred - level
            phi_gt = 1 - d_gt * (d_gt >= 0.15)
            phi_pred = 1 - d_pred * (d_pred >= 0.15)
            scores.append(float((np.abs(phi_gt - phi_pred) * unknown).sum()) / float(self.norm_const))
        self._add_scores(scores)
