"""An mmeval metric a ``LightningModule`` logs with ``self.log``: :class:`LightningMetric`.

Lightning logs a ``torchmetrics.Metric`` object: at the epoch's end it calls ``compute()`` on every
rank, logs the value and calls ``reset()``. :class:`LightningMetric` is such a metric whose
``update()`` is the mmeval metric's ``add()`` and whose ``compute()`` is the mmeval metric's
``compute()`` across the ranks (over the backend running -- ``torch_cpu`` / ``torch_cuda`` under
Lightning's DDP -- not torchmetrics' sync), one result key as a scalar tensor::

    class Model(LightningModule):
        def __init__(self, val_size):
            super().__init__()
            self.top1 = LightningMetric(Accuracy(topk=1), key="top1", size=val_size)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.top1.update(self(x), y)          # or update(..., indices=dataset_indices)
            self.log("val/top1", self.top1, on_epoch=True)

Lightning's ``DistributedSampler`` pads the last shard with repeated samples: give ``size=len(dataset)``
(or pass ``indices=`` to ``update()``) so that each sample counts once. torchmetrics (hence torch) is
imported when this module is, not by ``import mmeval``.
"""

from __future__ import annotations

from typing import Any, Optional, Union

from mmeval.collection import MetricCollection
from mmeval.core.base_metric import BaseMetric
from mmeval.metrics.extras import import_extra

__all__ = ["LightningMetric"]

_torchmetrics = import_extra("torchmetrics", "mmeval.integrations.lightning")
_torch = import_extra("torch", "mmeval.integrations.lightning")
_Metric: Any = _torchmetrics.Metric


class LightningMetric(_Metric):  # type: ignore[misc]
    """A ``torchmetrics.Metric`` computing one key of an mmeval metric (or :class:`MetricCollection`).

    Args:
        metric: the mmeval metric (its ``dist_backend`` decides the transport; ``None``: the running one).
        key: the key of its result to return (``'top1'``, ``'bbox_mAP'``, ``'acc/top1'`` in a collection).
        size: the dataset's size, passed to ``compute(size=...)``; ``None`` with ``indices=`` in ``update()``.
    """

    is_differentiable = False
    higher_is_better: Optional[bool] = None
    full_state_update = False

    def __init__(self, metric: Union[BaseMetric, MetricCollection], key: str, size: Optional[int] = None) -> None:
        super().__init__(sync_on_compute=False)  # the mmeval metric syncs itself, in its compute()
        self.metric, self.key, self.size = metric, key, size

    def update(self, *args: Any, **kwargs: Any) -> None:
        """The mmeval metric's ``add(*args, **kwargs)`` (tensors on any device are accepted)."""
        self.metric.add(*args, **kwargs)

    def compute(self) -> Any:
        """The mmeval metric's ``compute(size=...)`` across the ranks; ``key`` as a float64 scalar tensor."""
        results = self.metric.compute(size=self.size)
        if self.key not in results:
            raise KeyError(
                f"LightningMetric: {type(self.metric).__name__} returned {sorted(results)}, not {self.key!r}"
            )
        return _torch.tensor(float(results[self.key]), dtype=_torch.float64)

    def reset(self) -> None:
        """Drop this epoch's samples (Lightning calls it after logging the epoch's value)."""
        super().reset()
        self.metric.reset()
