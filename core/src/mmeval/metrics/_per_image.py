"""The shape the image metrics share: one score per image, the result their mean.

:class:`MeanOfImageScores` is a state metric whose only statistic is the exact sum of the images'
scores (``compute()`` moves one fixed-size sum whatever the number of images); :class:`ComparedImages` adds
the ``crop_border`` / ``input_order`` / ``convert_to`` / ``channel_order`` arguments of MMEval's
PSNR, SNR and SSIM. Also the argument and input checks they all use.
"""

from __future__ import annotations

import numbers
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Union

import numpy as np

from ..core.base_metric import BaseMetric
from ..core.errors import MetricArgumentError
from ..core.inputs import FINITE, FloatInput, to_numpy
from ..core.state import MetricState
from .utils.image_transforms import CHANNEL_ORDERS, INPUT_ORDERS, reorder_and_crop

__all__ = [
    "ComparedImages",
    "MaskedImageErrors",
    "MeanOfImageScores",
    "alpha_triples",
    "check_positive",
    "image_list",
    "masked_image_error",
    "same_length",
    "same_shape",
    "scores_with_masks",
]


def image_list(value: Any, what: str) -> List[np.ndarray]:
    """``value`` as a list of numpy images: a sequence of array-likes, or an array-like whose first axis is the image."""
    if isinstance(value, (list, tuple)):
        return [to_numpy(v, f"{what}[{i}]") for i, v in enumerate(value)]
    arr = to_numpy(value, what)
    if arr.ndim == 0:
        raise MetricArgumentError(
            f"{what} must be a sequence of images (or an array whose first axis is the image), got a scalar"
        )
    return list(arr)


def same_length(name: str, **seqs: Sequence[Any]) -> None:
    """Raise :class:`MetricArgumentError` naming ``name``'s arguments unless every sequence has one length."""
    lengths = {k: len(v) for k, v in seqs.items()}
    if len(set(lengths.values())) > 1:
        raise MetricArgumentError(f"{name}.add(): the arguments hold different numbers of images: {lengths}")


def same_shape(name: str, i: int, **arrays: np.ndarray) -> None:
    """Raise :class:`MetricArgumentError` unless the ``i``-th images of every argument have one shape."""
    shapes = {k: tuple(v.shape) for k, v in arrays.items()}
    if len(set(shapes.values())) > 1:
        raise MetricArgumentError(f"{name}.add(): image {i} has different shapes: {shapes}; they must be equal")


def check_positive(name: str, arg: str, value: Any) -> float:
    """``value`` as a float when it is a finite positive real number; else :class:`MetricArgumentError`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < float(value) < float("inf"):
        raise MetricArgumentError(f"{name}: {arg} must be a positive finite number, got {value!r}")
    return float(value)


def masked_image_error(name: str, err: np.ndarray, mask: Optional[np.ndarray], scaled: bool) -> float:
    """The mean of ``err`` (per-pixel errors), or its ``mask``-weighted mean.

    ``mask`` must broadcast to ``err``'s shape. ``scaled`` (MAE): ``sum(err * mask) / (sum(mask) * k +
    1e-12)`` with ``k = err.size / mask.size`` (a mask without the channel axis counts each pixel's
    channels); otherwise (MSE) ``sum(err * mask) / sum(mask)`` -- MMEval 0.2.1's two definitions.
    """
    if mask is None:
        return float(err.mean())
    try:
        weighted = err * np.broadcast_to(mask, err.shape)
    except ValueError:
        raise MetricArgumentError(
            f"{name}.add(): a mask of shape {mask.shape} does not broadcast to its image's shape {err.shape}"
        ) from None
    if scaled:
        return float(weighted.sum() / (mask.sum() * (err.size / mask.size) + 1e-12))
    return float(weighted.sum() / mask.sum())


def scores_with_masks(
    name: str,
    predictions: Any,
    groundtruths: Any,
    masks: Any,
    score: Callable[[np.ndarray, np.ndarray, Optional[np.ndarray]], float],
) -> List[float]:
    """Each image's ``score(pred, gt, mask)``; a 4-D+ image with a mask: the mean over its frames."""
    preds, gts = image_list(predictions, "predictions"), image_list(groundtruths, "groundtruths")
    same_length(name, predictions=preds, groundtruths=gts)
    mask_list = None
    if masks is not None:
        mask_list = image_list(masks, "masks")
        same_length(name, predictions=preds, masks=mask_list)
    out = []
    for i, (pred, gt) in enumerate(zip(preds, gts)):
        same_shape(name, i, predictions=pred, groundtruths=gt)
        if mask_list is None:
            out.append(score(pred, gt, None))
        elif pred.ndim <= 3:
            out.append(score(pred, gt, mask_list[i]))
        else:
            mask = mask_list[i]
            if mask.shape[0] != pred.shape[0]:
                raise MetricArgumentError(
                    f"{name}.add(): video {i} has {pred.shape[0]} frames but its mask {mask.shape[0]}"
                )
            out.append(float(np.mean([score(pred[t], gt[t], mask[t]) for t in range(pred.shape[0])])))
    return out


class MeanOfImageScores(BaseMetric):
    """A state metric reporting ``{KEY: mean of the images' scores}``.

    A subclass computes one score per image in ``add()`` and passes them to
    :meth:`_add_scores`; the state is their sum, declared ``exact_sum`` (the
    correctly rounded sum, the same bits at any world size and in any order),
    and the image count, so :meth:`~mmeval.core.BaseMetric.compute` moves a
    few hundred bytes whatever the number of images. The mean equals MMEval's
    mean of per-image results up to the order of MMEval's float additions.
    """

    #: the result key
    KEY = ""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._declare_state("score_sum", (), "float64", "exact_sum")

    def _add_scores(self, scores: Sequence[float]) -> None:
        self._add_rows(score_sum=np.asarray(scores, dtype=np.float64).reshape(-1))

    def compute_metric(self, results: Union[MetricState, Sequence[Any]]) -> Dict[str, float]:
        """The mean score: from the reduced state, or from MMEval's list of per-image scores."""
        if isinstance(results, MetricState):
            n, total = results.num_samples, float(results["score_sum"])
        else:
            n, total = len(results), float(np.sum(np.asarray(results, dtype=np.float64)))
        if n == 0:
            raise ValueError(f"{self.name}.compute_metric: no results to compute on (nothing was added)")
        return {self.KEY: total / n}


def alpha_triples(name: str, pred_alphas: Any, gt_alphas: Any, trimaps: Any) -> List[Any]:
    """The matting metrics' inputs as ``(pred, gt, unknown)`` per image: float64 alphas and the bool mask of
    the trimap's unknown region (value 128); every argument a sequence of images of one shape each."""
    preds, gts = image_list(pred_alphas, "pred_alphas"), image_list(gt_alphas, "gt_alphas")
    tris = image_list(trimaps, "trimaps")
    same_length(name, pred_alphas=preds, gt_alphas=gts, trimaps=tris)
    out = []
    for i, (pred, gt, tri) in enumerate(zip(preds, gts, tris)):
        same_shape(name, i, pred_alphas=pred, gt_alphas=gt, trimaps=tri)
        out.append((pred.astype(np.float64), gt.astype(np.float64), tri == 128))
    return out


class MaskedImageErrors(MeanOfImageScores):
    """``add(predictions, groundtruths, masks=None)`` scoring each image with :meth:`_image_error` (see
    :func:`scores_with_masks`): MMEval's MAE and MSE."""

    #: what each float argument of add() accepts, checked by the core at every add() (mmeval.core.inputs)
    float_inputs: ClassVar[Dict[str, FloatInput]] = {"predictions": FINITE, "groundtruths": FINITE, "masks": FINITE}

    def add(self, predictions: Any, groundtruths: Any, masks: Any = None) -> None:
        """Add a batch; see the class docstring. Keeps nothing of a batch it refuses."""
        self._add_scores(scores_with_masks(self.name, predictions, groundtruths, masks, self._image_error))

    def _image_error(self, prediction: np.ndarray, groundtruth: np.ndarray, mask: Optional[np.ndarray]) -> float:
        raise NotImplementedError


class ComparedImages(MeanOfImageScores):
    """A prediction compared with its ground truth, each made ready by :func:`reorder_and_crop` first.

    Args:
        crop_border: pixels left out at each edge (a non-negative int).
        input_order: ``'CHW'`` or ``'HWC'`` (any case); a 2-D image is (H, W).
        convert_to: ``None`` (compare the channels as they are) or ``'Y'``
            (BT.601 luma, from ``channel_order``).
        channel_order: ``'rgb'`` or ``'bgr'`` (any case), for ``convert_to``.
        **kwargs: :class:`~mmeval.core.BaseMetric` arguments.

    ``add(predictions, groundtruths, channel_order=None)``: sequences of
    images (H, W), (C, H, W) / (H, W, C) or videos (T, ...), values in [0,
    255]; ``channel_order`` overrides the constructor's for this batch. An
    image's score is the mean of its frames' scores.
    """

    #: what each float argument of add() accepts, checked by the core at every add() (mmeval.core.inputs)
    float_inputs: ClassVar[Dict[str, FloatInput]] = {"predictions": FINITE, "groundtruths": FINITE}

    def __init__(
        self,
        crop_border: int = 0,
        input_order: str = "CHW",
        convert_to: Optional[str] = None,
        channel_order: str = "rgb",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if isinstance(crop_border, bool) or not isinstance(crop_border, numbers.Integral) or crop_border < 0:
            raise MetricArgumentError(f"{self.name}: crop_border must be a non-negative int, got {crop_border!r}")
        if not isinstance(input_order, str) or input_order.upper() not in INPUT_ORDERS:
            raise MetricArgumentError(f"{self.name}: input_order must be 'HWC' or 'CHW', got {input_order!r}")
        if convert_to is not None and (not isinstance(convert_to, str) or convert_to.upper() != "Y"):
            raise MetricArgumentError(f"{self.name}: convert_to must be 'Y' or None, got {convert_to!r}")
        if convert_to is not None:
            _channel_order(self.name, channel_order)
        self.crop_border: int = int(crop_border)
        self.input_order: str = input_order.upper()
        self.convert_to: Optional[str] = convert_to
        self.channel_order: str = channel_order

    def add(self, predictions: Any, groundtruths: Any, channel_order: Optional[str] = None) -> None:
        """Add a batch of images; see the class docstring. Keeps nothing of a batch it refuses."""
        order = self.channel_order if channel_order is None else channel_order
        if self.convert_to is not None:
            order = _channel_order(self.name, order)
        preds, gts = image_list(predictions, "predictions"), image_list(groundtruths, "groundtruths")
        same_length(self.name, predictions=preds, groundtruths=gts)
        scores = []
        for i, (pred, gt) in enumerate(zip(preds, gts)):
            same_shape(self.name, i, predictions=pred, groundtruths=gt)
            p, g = (self._ready(x, order, i) for x in (pred, gt))
            if p.ndim == 3:
                p, g = p[None], g[None]
            scores.append(float(np.mean([self._frame_score(p[t], g[t]) for t in range(p.shape[0])])))
        self._add_scores(scores)

    def _ready(self, img: np.ndarray, order: str, i: int) -> np.ndarray:
        if img.ndim not in (2, 3, 4):
            raise MetricArgumentError(
                f"{self.name}.add(): image {i} must be (H, W), 3-D or a 4-D video, got shape {img.shape}"
            )
        out = reorder_and_crop(img, self.crop_border, self.input_order, self.convert_to, order)
        if out.shape[-3] == 0 or out.shape[-2] == 0:
            raise MetricArgumentError(
                f"{self.name}: crop_border={self.crop_border} leaves nothing of image {i} "
                f"(shape {img.shape}, input_order {self.input_order!r})"
            )
        return out

    def _frame_score(self, pred: np.ndarray, gt: np.ndarray) -> float:
        """The score of one (H, W, C) float64 frame pair."""
        raise NotImplementedError


def _channel_order(name: str, value: Any) -> str:
    if not isinstance(value, str) or value.lower() not in CHANNEL_ORDERS:
        raise MetricArgumentError(f"{name}: channel_order must be 'rgb' or 'bgr' to convert to Y, got {value!r}")
    return value.lower()
