"""MMEval 0.2.1's ``PrecisionRecallF1score``: one name for the single-label and the multi-label metric.

``PrecisionRecallF1score(task='singlelabel' | 'multilabel', ...)`` builds a
:class:`~mmeval.metrics.SingleLabelMetric` or a
:class:`~mmeval.metrics.MultiLabelMetric`. This module also holds MMEval's
import path of both (``from mmeval.metrics.precision_recall_f1score import
SingleLabelPrecisionRecallF1score``); the metrics themselves live in
:mod:`mmeval.metrics.single_label` and :mod:`mmeval.metrics.multi_label`.
"""

from __future__ import annotations

import numbers
from typing import Any, Optional, Sequence, Union

from ..core.errors import MetricArgumentError
from ..core.inputs import warn_user
from .multi_label import MultiLabelMetric as MultiLabelMetric
from .multi_label import MultiLabelPrecisionRecallF1score as MultiLabelPrecisionRecallF1score
from .single_label import SingleLabelMetric as SingleLabelMetric
from .single_label import SingleLabelPrecisionRecallF1score as SingleLabelPrecisionRecallF1score

__all__ = [
    "PrecisionRecallF1score",
    "SingleLabelPrecisionRecallF1score",
    "MultiLabelPrecisionRecallF1score",
    "SingleLabelMetric",
    "MultiLabelMetric",
]

#: The tasks :class:`PrecisionRecallF1score` dispatches on.
TASKS = ("singlelabel", "multilabel")


class PrecisionRecallF1score:
    """Precision, recall and F1-score of a single-label or a multi-label task: a factory, as in MMEval 0.2.1.

    ``PrecisionRecallF1score(task, num_classes, thrs, topk, items, average,
    **kwargs)`` returns (it is not an instance of this class):

    * ``task='singlelabel'`` (default): ``SingleLabelMetric(num_classes, thrs,
      items, average, **kwargs)``. ``topk`` does not apply: a ``topk`` other
      than ``None`` is ignored with a ``UserWarning`` (MMEval ignores it silently).
    * ``task='multilabel'``: ``MultiLabelMetric(num_classes, thr=thrs, topk,
      items, average, **kwargs)``. ``num_classes`` must be an int and
      ``thrs`` a single number or ``None``.

    ``**kwargs`` go to the metric (``dist_backend``, ``dataset_meta``, and for
    ``'multilabel'`` ``pred_is_onehot`` / ``label_is_onehot``). A bad
    argument raises :class:`~mmeval.core.errors.MetricArgumentError` (a
    ``ValueError``, and an ``AssertionError`` as MMEval asserted), naming it.
    """

    def __new__(  # type: ignore[misc]  # returns the metric the task names, as MMEval's does
        cls,
        task: str = "singlelabel",
        num_classes: Optional[int] = None,
        thrs: Union[float, Sequence[Optional[float]], None] = None,
        topk: Optional[int] = None,
        items: Sequence[str] = ("precision", "recall", "f1-score"),
        average: Optional[str] = "macro",
        **kwargs: Any,
    ) -> Union[SingleLabelMetric, MultiLabelMetric]:
        if task == "singlelabel":
            if topk is not None:
                warn_user(
                    f"PrecisionRecallF1score(task='singlelabel'): topk={topk!r} is ignored (a single-label metric "
                    f"predicts one class per sample); use Accuracy(topk=...) or task='multilabel'",
                    UserWarning,
                )
            return SingleLabelMetric(num_classes=num_classes, thrs=thrs, items=items, average=average, **kwargs)
        if task == "multilabel":
            if thrs is not None and (isinstance(thrs, bool) or not isinstance(thrs, numbers.Real)):
                raise MetricArgumentError(
                    f"PrecisionRecallF1score: task `'multilabel'` only supports a single threshold or None as thrs "
                    f"(it becomes MultiLabelMetric's thr), got thrs={thrs!r}"
                )
            if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral):
                raise MetricArgumentError(
                    f"PrecisionRecallF1score: `num_classes` is necessary for task 'multilabel' (an int: the number "
                    f"of labels), got num_classes={num_classes!r}"
                )
            return MultiLabelMetric(
                num_classes=int(num_classes), thr=thrs, topk=topk, items=items, average=average, **kwargs
            )
        raise MetricArgumentError(
            f"PrecisionRecallF1score: Expected argument `task` to either be 'singlelabel' or 'multilabel', "
            f"got task={task!r}"
        )
