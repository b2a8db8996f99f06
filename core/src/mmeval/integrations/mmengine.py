"""MMEngine's ``Evaluator`` computing an mmeval metric: :class:`MMEngineMetric`, ``'MMEvalMetric'`` in configs.

MMEngine's ``Evaluator`` takes any object with ``dataset_meta``, ``process(data_batch, data_samples)``
and ``evaluate(size)``. Importing this module imports MMEngine and registers the class in MMEngine's
``METRICS`` registry as ``'MMEvalMetric'``, so that an mmdet / mmpretrain style config selects it::

    custom_imports = dict(imports=["mmeval.integrations.mmengine"], allow_failed_imports=False)
    val_evaluator = [
        dict(type="MMEvalMetric", metric=dict(type="COCODetection", metric="bbox"), prefix="coco"),
        dict(type="MMEvalMetric", metric=dict(type="Accuracy", topk=(1, 5)), prefix="acc"),
    ]

The data samples MMEngine hands ``process()`` (dicts, after ``to_dict()``) become the metric's
``add()`` arguments through ``process_fn``; the built-in ones read mmdet's detection samples
(``COCODetection``: ``pred_instances``, ``img_id``, ``ori_shape``, ``instances``) and mmpretrain's
classification samples (``Accuracy``, ``SingleLabelMetric``, ``MultiLabelMetric``,
``AveragePrecision``: ``pred_score``, ``gt_label``). ``evaluate(size)`` is the metric's
``compute(size=size)`` over the backend running here (torch_cpu / torch_cuda under MMEngine's
torch.distributed, or any other), its keys prefixed ``prefix/key`` as MMEngine's metrics do, then
``reset()``: MMEngine's metrics drop their results after each evaluation.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from mmeval.collection import MetricCollection
from mmeval.core.base_metric import BaseMetric

__all__ = ["MMEngineMetric", "PROCESS_FNS", "classification_inputs", "detection_inputs", "register"]

#: ``process_fn(data_batch, data_samples, metric) -> (args, kwargs)`` for the metric's ``add()``.
ProcessFn = Callable[[Any, Sequence[Mapping[str, Any]], BaseMetric], Tuple[Tuple[Any, ...], Dict[str, Any]]]


def _numpy(value: Any) -> np.ndarray:
    """A tensor (any device) or array-like as a numpy array."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def detection_inputs(
    data_batch: Any, data_samples: Sequence[Mapping[str, Any]], metric: BaseMetric
) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
    """``COCODetection.add()``'s predictions and ground truths from mmdet's detection data samples.

    A prediction from ``pred_instances`` (``bboxes``, ``scores``, ``labels``, and ``masks`` when
    present) and ``img_id``; a ground truth from ``ori_shape`` and, without ``ann_file``, the raw
    ``instances`` (``bbox`` x1 y1 x2 y2, ``bbox_label``, ``ignore_flag``), as mmdet's CocoMetric reads them.
    """
    preds: List[Dict[str, Any]] = []
    gts: List[Dict[str, Any]] = []
    from_file = getattr(metric, "ann_file", None) is not None
    for sample in data_samples:
        pred = sample["pred_instances"]
        one = {k: _numpy(pred[k]) for k in ("bboxes", "scores", "labels")}
        if "masks" in pred:
            one["masks"] = _numpy(pred["masks"])
        one["img_id"] = sample["img_id"]
        preds.append(one)
        if from_file:
            gts.append({})
            continue
        height, width = (int(x) for x in sample["ori_shape"][:2])
        instances = sample.get("instances", [])
        gts.append(
            {
                "img_id": sample["img_id"],
                "width": width,
                "height": height,
                "bboxes": np.array([i["bbox"] for i in instances], dtype=np.float64).reshape(-1, 4),
                "labels": np.array([i["bbox_label"] for i in instances], dtype=np.int64),
                "ignore_flags": np.array([i.get("ignore_flag", 0) for i in instances], dtype=bool),
            }
        )
    return (preds, gts), {}


def classification_inputs(
    data_batch: Any, data_samples: Sequence[Mapping[str, Any]], metric: BaseMetric
) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
    """Scores (N, C) and labels from mmpretrain's classification samples (``pred_score``, ``gt_label``).

    One label per sample gives the class indices (N,); several (multi-label) give a one-hot (N, C).
    """
    scores = np.stack([_numpy(s["pred_score"]) for s in data_samples])
    labels = [_numpy(s["gt_label"]).reshape(-1) for s in data_samples]
    if all(label.size == 1 for label in labels):
        return (scores, np.concatenate(labels).astype(np.int64)), {}
    onehot = np.zeros(scores.shape, dtype=np.int64)
    for row, label in enumerate(labels):
        onehot[row, label.astype(np.int64)] = 1
    return (scores, onehot), {}


#: The built-in ``process_fn`` of each metric class name.
PROCESS_FNS: Dict[str, ProcessFn] = {
    "COCODetection": detection_inputs,
    "Accuracy": classification_inputs,
    "SingleLabelMetric": classification_inputs,
    "MultiLabelMetric": classification_inputs,
    "AveragePrecision": classification_inputs,
}


def _build(metric: Union[BaseMetric, MetricCollection, Mapping[str, Any]]) -> Union[BaseMetric, MetricCollection]:
    if isinstance(metric, (BaseMetric, MetricCollection)):
        return metric
    if isinstance(metric, Mapping) and "type" in metric:
        import mmeval.metrics

        config = dict(metric)
        name = config.pop("type")
        cls = getattr(mmeval.metrics, name, None) if isinstance(name, str) else name
        if not (isinstance(cls, type) and issubclass(cls, BaseMetric)):
            raise TypeError(f"MMEvalMetric: metric type {name!r} is not a metric of mmeval.metrics")
        return cls(**config)
    raise TypeError(f"MMEvalMetric: metric must be an mmeval metric or a dict(type=...) config, got {metric!r}")


class MMEngineMetric:
    """An mmeval metric (or :class:`~mmeval.collection.MetricCollection`) as MMEngine's ``Evaluator`` runs one.

    Args:
        metric: the metric, or its config (``dict(type="COCODetection", ...)``, a class of
            :mod:`mmeval.metrics`).
        prefix: the result keys become ``prefix/key`` (MMEngine's rule); ``None`` keeps them.
        process_fn: ``process_fn(data_batch, data_samples, metric) -> (args, kwargs)`` for the
            metric's ``add()``; default: :data:`PROCESS_FNS` by the metric's class name (a
            collection: each member's own, and its results under ``name/key``).
        indices_key: a data sample key holding its dataset index (``'sample_idx'``): then
            ``add(..., indices=...)`` and each sample counts once whatever the sampler
            pads; ``None`` (the default): ``evaluate(size)`` drops MMEngine's ``DefaultSampler``
            padding by ``size``.
        collect_device: accepted for MMEngine configs; the backend decides where data moves.
    """

    def __init__(
        self,
        metric: Union[BaseMetric, MetricCollection, Mapping[str, Any]],
        prefix: Optional[str] = None,
        process_fn: Optional[ProcessFn] = None,
        indices_key: Optional[str] = None,
        collect_device: str = "cpu",
    ) -> None:
        self.metric = _build(metric)
        self.prefix = prefix
        self.indices_key = indices_key
        self.collect_device = collect_device
        members = self.metric.items() if isinstance(self.metric, MetricCollection) else [("", self.metric)]
        self._process_fns: List[Tuple[BaseMetric, ProcessFn]] = []
        for name, member in members:
            fn = process_fn or PROCESS_FNS.get(type(member).__name__)
            if fn is None:
                raise TypeError(
                    f"MMEvalMetric: no built-in process_fn for {type(member).__name__}{f' ({name})' if name else ''}; "
                    f"pass process_fn=(data_batch, data_samples, metric) -> (args, kwargs) for its add()"
                )
            self._process_fns.append((member, fn))

    @property
    def dataset_meta(self) -> Optional[Dict[str, Any]]:
        return self.metric.dataset_meta

    @dataset_meta.setter
    def dataset_meta(self, value: Optional[Dict[str, Any]]) -> None:
        self.metric.dataset_meta = value

    def process(self, data_batch: Any, data_samples: Sequence[Any]) -> None:
        """Add one batch: each data sample (a dict, or a data element with ``to_dict()``) through ``process_fn``."""
        samples = [s.to_dict() if hasattr(s, "to_dict") else s for s in data_samples]
        extra: Dict[str, Any] = {}
        if self.indices_key is not None:
            extra["indices"] = np.array([s[self.indices_key] for s in samples], dtype=np.int64)
        for member, fn in self._process_fns:
            args, kwargs = fn(data_batch, samples, member)
            member.add(*args, **{**extra, **kwargs})

    def evaluate(self, size: int) -> Dict[str, Any]:
        """The metric over every rank's samples (the same dict on every rank), keys ``prefix/key``; then ``reset()``."""
        results = self.metric.compute(size=None if self.indices_key is not None else size)
        self.metric.reset()
        if self.prefix:
            return {f"{self.prefix}/{k}": v for k, v in results.items()}
        return dict(results)


def register() -> None:
    """Register :class:`MMEngineMetric` in MMEngine's ``METRICS`` registry as ``'MMEvalMetric'`` (idempotent)."""
    from mmeval.metrics.extras import import_extra

    METRICS = import_extra("mmengine.registry", "mmeval.integrations.mmengine").METRICS
    if METRICS.get("MMEvalMetric") is not MMEngineMetric:
        METRICS.register_module(name="MMEvalMetric", module=MMEngineMetric, force=True)


register()
