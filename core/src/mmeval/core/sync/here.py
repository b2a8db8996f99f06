"""The one-process path of ``compute()``: no collective, the samples counted as ``compute()`` counts them.

With ``indices=`` each dataset index counts once (results in index order), else
the first ``size`` samples (:func:`~mmeval.core.sync.ordering.kept_in_one_process`);
a state metric's ``compute_metric`` gets the state over the rows counted, a
per-sample metric's the results counted.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from ..results import select, state_over
from . import coverage
from .ordering import kept_in_one_process
from .protocols import Participant

__all__ = ["compute_here"]


def compute_here(metric: Participant, size: Optional[int]) -> Dict[str, Any]:
    """``compute(size)`` of ``metric`` in one process (its samples still to summarize summarized first)."""
    metric.computation._summarize_pending()
    kept = metric.kept
    keep = kept_in_one_process(kept.num_results, kept.index_flag(), kept.indices(), metric.mode, size, metric.name)
    if metric.coverage:
        coverage.deliver(coverage.report_here(kept, metric.mode, size), metric.sink)
    if metric.is_state:
        return metric.computation.compute_metric(
            state_over(metric.specs, kept.rows(), keep, metric.computation._state_of_rows)
        )
    results = kept.merged()
    return metric.computation.compute_metric(results if keep is None else select(results, keep))
