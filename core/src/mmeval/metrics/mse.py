"""Mean squared error of images (MMEval's ``MeanSquaredError``)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from ._per_image import MaskedImageErrors, masked_image_error

__all__ = ["MSE", "MeanSquaredError"]


class MeanSquaredError(MaskedImageErrors):
    """Mean squared error of images with values in [0, 255], on the [0, 1] scale, averaged over images.

    Args:
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, groundtruths, masks=None)`` as
    :class:`~mmeval.metrics.MeanAbsoluteError`: an image's score is
    ``mean((gt / 255 - pred / 255)^2)``, with a mask ``sum(err * mask) /
    sum(mask)`` (MMEval 0.2.1's definition: unlike its MAE, a mask without
    the channel axis is not scaled by the channel count). Result key ``mse``.

    A state metric: the sum of the images' scores and their count move,
    whatever the number of images.

    Units: ``mse`` is on the [0, 1] scale of pixels divided by 255 (squared), as MMEval 0.2.1's.
    """

    KEY = "mse"

    @staticmethod
    def compute_mse(prediction: np.ndarray, groundtruth: np.ndarray, mask: Optional[np.ndarray] = None) -> float:
        """MSE of two images with values in [0, 255], on the [0, 1] scale (mask-weighted with ``mask``)."""
        diff = np.asarray(groundtruth, dtype=np.float64) / 255.0 - np.asarray(prediction, dtype=np.float64) / 255.0
        return masked_image_error("MeanSquaredError", diff * diff, None if mask is None else np.asarray(mask), False)

    _image_error = compute_mse


#: MMEval 0.2.1's deprecated name
MSE = MeanSquaredError
