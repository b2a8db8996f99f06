"""Mean squared error of alpha mattes over the trimap's unknown region (MMEval's ``MattingMeanSquaredError``)."""

from __future__ import annotations

from typing import Any, ClassVar, Dict

from ..core.inputs import FINITE, FloatInput
from ._per_image import MeanOfImageScores, alpha_triples

__all__ = ["MattingMSE", "MattingMeanSquaredError"]


class MattingMeanSquaredError(MeanOfImageScores):
    """``sum((pred - gt)^2) / (number of unknown pixels)`` per alpha matte, averaged over mattes.

    The unknown pixels are those where the trimap is 128 (0 is background,
    255 foreground). As in MMEval 0.2.1 the squared errors are summed over the
    whole matte (the prediction is expected to be masked by the trimap
    already) and a matte without unknown pixels scores 0.

    Args:
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(pred_alphas, gt_alphas, trimaps)``: sequences of mattes (or arrays
    whose first axis is the matte), the three of one shape per matte.
    Differences are taken in float64 (MMEval 0.2.1 subtracted in the inputs'
    dtype: uint8 mattes wrapped around). Result key ``matting_mse``.

    A state metric: the sum of the mattes' scores and their count move,
    whatever the number of mattes.

    Units: ``matting_mse`` in the inputs' units squared (mattes in [0, 1] give [0, 1]), as MMEval 0.2.1's.
    """

    #: what each float argument of add() accepts, checked by the core at every add() (mmeval.core.inputs)
    float_inputs: ClassVar[Dict[str, FloatInput]] = {"pred_alphas": FINITE, "gt_alphas": FINITE, "trimaps": FINITE}

    KEY = "matting_mse"

    def add(self, pred_alphas: Any, gt_alphas: Any, trimaps: Any) -> None:
        """Add a batch; see the class docstring. Keeps nothing of a batch it refuses."""
        scores = []
        for pred, gt, unknown in alpha_triples(self.name, pred_alphas, gt_alphas, trimaps):
            weight = int(unknown.sum())
            scores.append(float(((pred - gt) ** 2).sum()) / weight if weight else 0.0)
        self._add_scores(scores)


#: MMEval 0.2.1's deprecated name
MattingMSE = MattingMeanSquaredError
