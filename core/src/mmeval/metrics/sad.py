"""Sum of absolute differences of images (MMEval's ``SumAbsoluteDifferences``, image matting)."""

from __future__ import annotations

from typing import Any, ClassVar, Dict

import numpy as np

from ..core.inputs import FINITE, FloatInput
from ._per_image import MeanOfImageScores, check_positive, image_list, same_length, same_shape

__all__ = ["SAD", "SumAbsoluteDifferences"]


class SumAbsoluteDifferences(MeanOfImageScores):
    """``sum(|pred - gt|) / norm_const`` per image, averaged over images.

    Args:
        norm_const: the divisor that keeps the numbers small (default 1000).
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, groundtruths)``: sequences of images (or an array
    whose first axis is the image) of any shape, a prediction and its ground
    truth of one shape. Differences are taken in float64: unlike MMEval 0.2.1,
    which subtracted in the inputs' dtype, uint8 inputs do not wrap around
    (MMEval scores 0 against 255 in uint8 as a difference of 1). Result key
    ``sad`` (a Python float).

    A state metric: the sum of the images' scores and their count move,
    whatever the number of images.

    Units: ``sad`` in the inputs' units divided by ``norm_const``, as MMEval 0.2.1's.
    """

    #: what each float argument of add() accepts, checked by the core at every add() (mmeval.core.inputs)
    float_inputs: ClassVar[Dict[str, FloatInput]] = {"predictions": FINITE, "groundtruths": FINITE}

    KEY = "sad"

    def __init__(self, norm_const: float = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        check_positive(self.name, "norm_const", norm_const)
        self.norm_const = norm_const

    def add(self, predictions: Any, groundtruths: Any) -> None:
        """Add a batch; see the class docstring. Keeps nothing of a batch it refuses."""
        preds, gts = image_list(predictions, "predictions"), image_list(groundtruths, "groundtruths")
        same_length(self.name, predictions=preds, groundtruths=gts)
        scores = []
        for i, (pred, gt) in enumerate(zip(preds, gts)):
            same_shape(self.name, i, predictions=pred, groundtruths=gt)
            diff = np.abs(pred.astype(np.float64) - gt.astype(np.float64))
            scores.append(float(diff.sum()) / float(self.norm_const))
        self._add_scores(scores)


#: MMEval 0.2.1's deprecated name
SAD = SumAbsoluteDifferences
