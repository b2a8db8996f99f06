"""Precision-recall curves of the ranking metrics, and their ``plot()`` (matplotlib, the ``plot`` extra).

A metric that ranks (``AveragePrecision``, ``VOCMeanAP`` and the metrics
built on it) keeps its curves when ``metric.keep_curves = True`` was set
before ``compute()``: on the rank that ran ``compute_metric`` (rank 0 under
several ranks; every process alone), :attr:`CurveMixin.pr_curves` then holds
one curve per class, at most :data:`MAX_POINTS` points each, and
:meth:`CurveMixin.plot` draws them. matplotlib is imported by ``plot()`` only;
without it the error names the extra: ``pip install 'mmeval-core[plot]'``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from ..core.errors import MetricArgumentError
from .extras import import_extra

__all__ = ["MAX_POINTS", "CurveMixin", "PRCurves", "pr_curve", "plot_pr_curves", "thin"]

#: Points kept per curve (evenly spaced along the ranking, the ends always kept): enough for a picture.
MAX_POINTS = 2048


def thin(recall: np.ndarray, precision: np.ndarray, most: int = MAX_POINTS) -> Tuple[np.ndarray, np.ndarray]:
    """``recall`` and ``precision`` with at most ``most`` points (the first and last kept), as float64."""
    n = recall.shape[0]
    if n > most:
        pick = np.unique(np.linspace(0, n - 1, most).round().astype(np.int64))
        recall, precision = recall[pick], precision[pick]
    return np.asarray(recall, np.float64), np.asarray(precision, np.float64)


def pr_curve(scores: np.ndarray, labels: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """One class's precision-recall curve: one point per distinct score, highest score first.

    At a threshold t every sample scored >= t is predicted positive (tied
    scores enter together); recall = true positives / positives (0 without
    positives), precision = true positives / predicted positives.
    """
    order = np.argsort(-scores, kind="stable")
    s, y = scores[order], labels[order].astype(bool)
    tp = np.cumsum(y)
    ends = np.flatnonzero(np.append(s[1:] != s[:-1], True))  # the last sample of each group of equal scores
    positives = max(int(tp[-1]) if tp.size else 0, 1)
    return tp[ends] / positives, tp[ends] / (ends + 1.0)


@dataclass(frozen=True)
class PRCurves:
    """Curves to draw: per class its name, recall and precision (same length), and its AP (None: not known)."""

    title: str
    names: List[str]
    recall: List[np.ndarray]
    precision: List[np.ndarray]
    ap: List[Optional[float]]


def plot_pr_curves(
    curves: PRCurves, ax: Any = None, classes: Optional[Sequence[int]] = None, user: str = "plot"
) -> Any:
    """Draw ``curves`` (recall on x, precision on y) on ``ax`` (a new figure's when None); returns ``(fig, ax)``.

    ``classes``: the positions of the classes to draw (default every class).
    matplotlib is imported here; without it the error names the ``plot`` extra.
    """
    plt = import_extra("matplotlib.pyplot", user)
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 5))
    else:
        fig = ax.figure
    for k in range(len(curves.names)) if classes is None else classes:
        ap = curves.ap[k]
        label = curves.names[k] if ap is None else f"{curves.names[k]} (AP {ap:.3f})"
        ax.step(curves.recall[k], curves.precision[k], where="pre", label=label)  # p_i over (r_{i-1}, r_i]: the AP area
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_title(curves.title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    return fig, ax


class CurveMixin:
    """``keep_curves``, ``pr_curves`` and ``plot()`` for a metric whose ``compute_metric`` ranks scores."""

    #: Set ``metric.keep_curves = True`` (on every rank: it is part of the question) before ``compute()``.
    keep_curves: bool = False

    @property
    def pr_curves(self) -> Optional[PRCurves]:
        """The curves of the last ``compute()`` on this rank (``None``: not kept, or computed on another rank)."""
        return self.__dict__.get("_pr_curves")

    def _keep(self, curves: PRCurves) -> None:
        self.__dict__["_pr_curves"] = curves

    def plot(self, ax: Any = None, classes: Optional[Sequence[int]] = None) -> Any:
        """Draw the precision-recall curves of the last ``compute()``; returns matplotlib's ``(fig, ax)``.

        Needs ``keep_curves = True`` before ``compute()`` and runs where
        ``compute_metric`` ran (rank 0 under several ranks). ``ax``: draw on
        this matplotlib Axes; ``classes``: the class positions to draw.
        """
        name = type(self).__name__
        curves = self.pr_curves
        if curves is None:
            raise MetricArgumentError(
                f"{name}.plot(): no curves kept; set metric.keep_curves = True (on every rank) before compute(). "
                f"The curves stay on the rank that computed the metric (rank 0 under several ranks)"
            )
        return plot_pr_curves(curves, ax, classes, user=f"{name}.plot()")
