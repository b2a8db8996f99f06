"""End point error of optical flow (MMEval's ``EndPointError``)."""

from __future__ import annotations

from typing import Any, ClassVar, Dict, Sequence, Tuple, Union

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError
from ..core.inputs import FINITE, FloatInput
from ..core.state import MetricState
from ._per_image import image_list, same_length, same_shape

__all__ = ["EndPointError"]


class EndPointError(BaseMetric):
    """The mean Euclidean distance between predicted and true flow vectors, over every valid pixel.

    Args:
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, labels, valid_masks=None)``: sequences of flow maps
    (..., 2) (or arrays whose first axis is the map), numpy arrays or tensors;
    ``valid_masks`` one mask (...) per map: a pixel counts where its mask is
    >= 0.5 (every pixel without masks). Result key ``EPE``: the sum of the
    valid pixels' end point errors over their number (a Python float; ``nan``
    when no pixel is valid).

    As MMEval 0.2.1 (a mean weighted by each map's valid pixels), except that
    a map without a valid pixel adds nothing here, where MMEval's result
    became ``nan``. Torch inputs are computed in float64 here (MMEval: in the
    tensor's dtype), so float32 tensors agree to float32 precision.

    A state metric: the sum of the errors and the number of valid pixels
    move (two float64 values), whatever the number of maps.

    Units: ``EPE`` in the flow's units (pixels), as MMEval 0.2.1's.
    """

    #: what each float argument of add() accepts, checked by the core at every add() (mmeval.core.inputs)
    float_inputs: ClassVar[Dict[str, FloatInput]] = {"predictions": FINITE, "labels": FINITE, "valid_masks": FINITE}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._declare_state("epe_sum", (), "float64", "exact_sum")
        self._declare_state("valid_pixels", (), "float64", "exact_sum")

    def add(self, predictions: Any, labels: Any, valid_masks: Any = None) -> None:
        """Add a batch; see the class docstring. Keeps nothing of a batch it refuses."""
        preds, labs = image_list(predictions, "predictions"), image_list(labels, "labels")
        same_length(self.name, predictions=preds, labels=labs)
        masks = None
        if valid_masks is not None:
            masks = image_list(valid_masks, "valid_masks")
            same_length(self.name, predictions=preds, valid_masks=masks)
        sums, counts = np.empty(len(preds)), np.empty(len(preds))
        for i, (pred, lab) in enumerate(zip(preds, labs)):
            same_shape(self.name, i, predictions=pred, labels=lab)
            if pred.ndim == 0 or pred.shape[-1] != 2:
                raise MetricArgumentError(
                    f"EndPointError.add(): flow map {i} must have a last axis of 2 (u, v), got shape {pred.shape}"
                )
            if masks is not None and masks[i].size != pred[..., 0].size:
                raise MetricArgumentError(
                    f"EndPointError.add(): valid_masks[{i}] has shape {masks[i].shape}, its "
                    f"flow map {pred.shape}: one mask value per pixel"
                )
            sums[i], counts[i] = self._map_sum(pred, lab, None if masks is None else masks[i])
        self._add_rows(epe_sum=sums, valid_pixels=counts)

    @staticmethod
    def _map_sum(pred: np.ndarray, lab: np.ndarray, mask: Any) -> Tuple[float, int]:
        """The sum of one map's valid end point errors and the number of its valid pixels."""
        epe = np.sqrt(np.sum((pred.astype(np.float64) - lab.astype(np.float64)) ** 2, axis=-1)).reshape(-1)
        valid = np.ones(epe.shape, bool) if mask is None else np.asarray(mask).reshape(-1) >= 0.5
        return float(epe[valid].sum()), int(valid.sum())

    def compute_metric(self, results: Union[MetricState, Sequence[Tuple[Any, Any]]]) -> Dict[str, float]:
        """``EPE`` from the reduced sums, or from MMEval's per-map ``(mean EPE, valid pixels)`` pairs."""
        if isinstance(results, MetricState):
            n, total, count = results.num_samples, float(results["epe_sum"]), float(results["valid_pixels"])
        else:
            n = len(results)
            total = float(sum(float(np.sum(m)) * int(c) for m, c in results if int(c)))
            count = float(sum(int(c) for _, c in results))
        if n == 0:
            raise ValueError("EndPointError.compute_metric: no results to compute on (nothing was added)")
        return {"EPE": total / count if count else float("nan")}
