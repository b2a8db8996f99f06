"""Mean absolute error of images (MMEval's ``MeanAbsoluteError``)."""

from __future__ import annotations

from typing import Optional

import numpy as np

from ._per_image import MaskedImageErrors, masked_image_error

__all__ = ["MAE", "MeanAbsoluteError"]


class MeanAbsoluteError(MaskedImageErrors):
    """Mean absolute error of images with values in [0, 255], on the [0, 1] scale, averaged over images.

    Args:
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, groundtruths, masks=None)``: sequences of images of
    any shape (a prediction and its ground truth of one shape). An image's
    score is ``mean(|gt / 255 - pred / 255|)``; with a mask (broadcastable to
    the image) the mask-weighted mean, MMEval 0.2.1's ``sum(err * mask) /
    (sum(mask) * k + 1e-12)`` with ``k`` the image's size over the mask's
    (a mask without the channel axis counts every channel); a 4-D+ image
    with a mask is a video whose score is the mean of its frames'
    (``masks[i][t]`` for frame ``t``). Result key ``mae`` (a Python float).

    A state metric: the sum of the images' scores and their count move,
    whatever the number of images.

    Units: ``mae`` is on the [0, 1] scale of pixels divided by 255, as MMEval 0.2.1's.
    """

    KEY = "mae"

    @staticmethod
    def compute_mae(prediction: np.ndarray, groundtruth: np.ndarray, mask: Optional[np.ndarray] = None) -> float:
        """MAE of two images with values in [0, 255], on the [0, 1] scale (mask-weighted with ``mask``)."""
        err = np.abs(
            np.asarray(groundtruth, dtype=np.float64) / 255.0 - np.asarray(prediction, dtype=np.float64) / 255.0
        )
        return masked_image_error("MeanAbsoluteError", err, None if mask is None else np.asarray(mask), True)

    _image_error = compute_mae


#: MMEval 0.2.1's deprecated name
MAE = MeanAbsoluteError
