"""Mean squared error of images (MMEval's ``MeanSquaredError``)."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ._per_image import MeanOfImageScores, masked_image_error, scores_with_masks

__all__ = ["MSE", "MeanSquaredError"]


class MeanSquaredError(MeanOfImageScores):
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
    """

    KEY = "mse"

    def add(self, predictions: Any, groundtruths: Any, masks: Any = None) -> None:
        """Add a batch; see the class docstring. Keeps nothing of a batch it refuses."""
        self._add_scores(scores_with_masks(self.name, predictions, groundtruths, masks, self.compute_mse))

    @staticmethod
    def compute_mse(prediction: np.ndarray, groundtruth: np.ndarray, mask: Optional[np.ndarray] = None) -> float:
        """MSE of two images with values in [0, 255], on the [0, 1] scale (mask-weighted with ``mask``)."""
        diff = np.asarray(groundtruth, dtype=np.float64) / 255.0 - np.asarray(prediction, dtype=np.float64) / 255.0
        return masked_image_error("MeanSquaredError", diff * diff, None if mask is None else np.asarray(mask), False)


#: MMEval 0.2.1's deprecated name
MSE = MeanSquaredError
