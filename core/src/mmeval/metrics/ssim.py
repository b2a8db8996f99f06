"""Structural similarity of images (MMEval's ``StructuralSimilarity``), in numpy."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..core.errors import MetricArgumentError
from ._per_image import ComparedImages

__all__ = ["SSIM", "StructuralSimilarity", "gaussian_window"]

#: the window of Wang et al. (2004): an 11 x 11 Gaussian of standard deviation 1.5
WINDOW_SIZE = 11
WINDOW_SIGMA = 1.5


def gaussian_window(size: int = WINDOW_SIZE, sigma: float = WINDOW_SIGMA) -> np.ndarray:
    """The 1-D Gaussian of ``size`` taps and standard deviation ``sigma``, summing to 1 (float64)."""
    x = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    g = np.exp(-(x * x) / (2.0 * sigma * sigma))
    return np.asarray(g / g.sum())


def _valid_filter(img: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``img`` (H, W) filtered by the separable window ``outer(g, g)`` where the window lies inside the image."""
    rows = sliding_window_view(img, g.size, axis=1) @ g
    return np.asarray(sliding_window_view(rows, g.size, axis=0) @ g)


class StructuralSimilarity(ComparedImages):
    """SSIM (Wang et al., 2004) per channel, averaged over channels, frames and images.

    The statistics are Gaussian-weighted (11 x 11 window, sigma 1.5) over every
    position where the window lies inside the image (so an image, after
    ``crop_border``, must be at least 11 x 11); ``C1 = (0.01 * 255)^2``, ``C2 =
    (0.03 * 255)^2``; a channel's SSIM is the mean of its SSIM map. This is
    MMEval 0.2.1's (and the authors' MATLAB code's) definition, and
    scikit-image's ``structural_similarity(gaussian_weights=True, sigma=1.5,
    use_sample_covariance=False, data_range=255)``: scikit-image filters the
    whole image, then averages the map without its 5-pixel border -- the same
    positions.

    Arguments as :class:`~mmeval.metrics.PeakSignalNoiseRatio`'s (``crop_border``, ``input_order``,
    ``convert_to``, ``channel_order``).

    ``add(predictions, groundtruths, channel_order=None)`` as
    :class:`~mmeval.metrics.PeakSignalNoiseRatio`. Result key ``ssim`` (a
    Python float). Numpy only (MMEval filtered with OpenCV; the valid region
    does not depend on a border mode, so the values agree to rounding).

    A state metric: the sum of the images' SSIMs and their count move,
    whatever the number of images.

    Units: ``ssim`` is an index in [-1, 1] (1: identical), as MMEval 0.2.1's.
    """

    KEY = "ssim"

    def _frame_score(self, pred: np.ndarray, gt: np.ndarray) -> float:
        if pred.shape[0] < WINDOW_SIZE or pred.shape[1] < WINDOW_SIZE:
            raise MetricArgumentError(
                f"StructuralSimilarity needs images of at least {WINDOW_SIZE} x {WINDOW_SIZE} pixels after "
                f"crop_border={self.crop_border}, got {pred.shape[0]} x {pred.shape[1]}"
            )
        return float(np.mean([self.compute_ssim(pred[..., c], gt[..., c]) for c in range(pred.shape[2])]))

    @staticmethod
    def compute_ssim(img1: np.ndarray, img2: np.ndarray) -> float:
        """SSIM of two single-channel images (H, W) with values in [0, 255], both at least 11 x 11."""
        a, b = np.asarray(img1, dtype=np.float64), np.asarray(img2, dtype=np.float64)
        if a.ndim != 2 or a.shape != b.shape or min(a.shape) < WINDOW_SIZE:
            raise MetricArgumentError(
                f"compute_ssim needs two (H, W) images of one shape, at least "
                f"{WINDOW_SIZE} x {WINDOW_SIZE}, got {a.shape} and {b.shape}"
            )
        c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
        g = gaussian_window()
        mu1, mu2 = _valid_filter(a, g), _valid_filter(b, g)
        var1 = _valid_filter(a * a, g) - mu1 * mu1
        var2 = _valid_filter(b * b, g) - mu2 * mu2
        cov = _valid_filter(a * b, g) - mu1 * mu2
        ssim_map = ((2 * mu1 * mu2 + c1) * (2 * cov + c2)) / ((mu1 * mu1 + mu2 * mu2 + c1) * (var1 + var2 + c2))
        return float(ssim_map.mean())


#: MMEval 0.2.1's deprecated name
SSIM = StructuralSimilarity
