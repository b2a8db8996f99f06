"""Peak signal-to-noise ratio of images (MMEval's ``PeakSignalNoiseRatio``)."""

from __future__ import annotations

import numpy as np

from ._per_image import ComparedImages

__all__ = ["PSNR", "PeakSignalNoiseRatio"]


class PeakSignalNoiseRatio(ComparedImages):
    """PSNR in dB, ``20 log10(255 / sqrt(MSE))`` per image (``inf`` for identical images), averaged over images.

    Args:
        crop_border: pixels left out at each edge (default 0).
        input_order: ``'CHW'`` (default) or ``'HWC'``; a 2-D image is (H, W).
        convert_to: ``None`` (every channel) or ``'Y'`` (BT.601 luma).
        channel_order: ``'rgb'`` (default) or ``'bgr'``, read for ``convert_to='Y'``.
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, groundtruths, channel_order=None)``: sequences of images
    (or an array whose first axis is the image) with values in [0, 255]:
    (H, W), 3-D in ``input_order``, or a 4-D video (T, ...) whose score is the
    mean of its frames'. As MMEval 0.2.1, the pixels are cast to float32 before
    the comparison. Result key ``psnr`` (dB, a Python float).

    A state metric: each image's PSNR is summed as it is added and
    :meth:`compute` moves that sum and the count (bytes independent of the
    number of images). Bad arguments raise
    :class:`~mmeval.core.errors.MetricArgumentError` (a ``ValueError`` and an
    ``AssertionError``, as MMEval's asserts).

    Units: ``psnr`` in decibels (dB), as MMEval 0.2.1's.
    """

    KEY = "psnr"

    def _frame_score(self, pred: np.ndarray, gt: np.ndarray) -> float:
        return float(self.compute_psnr(pred, gt))

    @staticmethod
    def compute_psnr(prediction: np.ndarray, groundtruth: np.ndarray) -> float:
        """PSNR (dB) of two images with values in [0, 255]; ``inf`` when they are equal."""
        mse = float(
            np.mean((np.asarray(groundtruth, dtype=np.float64) - np.asarray(prediction, dtype=np.float64)) ** 2)
        )
        return float("inf") if mse == 0 else float(20.0 * np.log10(255.0 / np.sqrt(mse)))


#: MMEval 0.2.1's deprecated name
PSNR = PeakSignalNoiseRatio
