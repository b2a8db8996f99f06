"""The state path of ``compute()``: a state metric's counts combined across ranks with ``all_reduce``.

Normally one int64 reduction carries every rank's layout (sample count, index
flag, largest index), its sums and its last ``world_size - 1`` rows, so that a
sampler's padding is subtracted without a second round; otherwise the kept
rows are reduced and combined in a second round. See :mod:`mmeval.core.state`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Sequence

import numpy as np

from ..dist_backends.base_backend import BaseDistBackend
from ..dist_backends.transport import asking
from ..results import ArrayResults, RankResults, state_over
from ..state import MetricState, StateSpec, pack, packed_as, packed_width, unpack
from . import coverage
from .ordering import check_layout, kept_count, kept_samples, warn_sharding, warn_short
from .protocols import Call

if TYPE_CHECKING:
    from .protocols import StateComputation

__all__ = ["FLAGS", "TAIL_BUDGET", "compute_state"]

#: Index flags as the first reduction carries them (see :meth:`mmeval.core.results.RankResults.index_flag`).
FLAGS = ("empty", "none", "all", "mixed")
#: Bytes of last rows the first reduction may carry.
TAIL_BUDGET = 2048


def compute_state(
    kept: RankResults,
    specs: Sequence[StateSpec],
    call: Call,
    backend: BaseDistBackend,
    computation: "StateComputation",
) -> Dict[str, Any]:
    """The state path: normally one int64 ``all_reduce`` carrying the layout, the state and the last rows.

    The first reduction carries every rank's count, index flag and largest
    index (in its own slots), the int64 sums over all its rows (an
    ``exact_sum`` statistic's limbs among them), and -- when every statistic
    is such an int64 sum and it fits :data:`TAIL_BUDGET` -- its
    last ``world_size - 1`` rows, so that the padding ``size`` cuts (at most
    ``world_size - 1`` samples a rank under ``DistributedSampler``) is
    subtracted without a second round. Otherwise (indices, min / max / float
    statistics, more to drop) a second round reduces the rows each rank keeps.
    ``kept`` is what this rank kept, ``specs`` the declared state; ``computation``
    builds a state from rows and the metric from the world's state.
    """
    rank, ws = backend.rank, backend.world_size
    question, size, name, mode = call.question, call.size, call.name, call.mode
    n, flag = kept.num_results, kept.index_flag()
    indices = kept.indices() if flag == "all" else None
    top = int(indices.max()) if indices is not None and indices.size else -1

    def state_at(rows: Optional[ArrayResults], keep: Optional[np.ndarray]) -> MetricState:
        return state_over(specs, rows, keep, computation._state_of_rows)

    sums_only = all(packed_as(s) == ("int64", "sum") for s in specs)  # exact float sums too: int64 limbs
    width = sum(packed_width(s) for s in specs) + 1  # + the sample count
    tail = ws - 1 if sums_only and ws * (ws - 1) * width * 8 <= TAIL_BUDGET else 0
    head = np.zeros(3 * ws, dtype=np.int64)
    head[[rank, ws + rank, 2 * ws + rank]] = n, FLAGS.index(flag), top
    parts = [head]
    if sums_only:
        parts.append(pack(specs, kept.whole_state(specs))[("int64", "sum")])
        last = np.zeros((ws, tail, width), dtype=np.int64)
        m = min(tail, n)
        if m:
            rows_m = kept.last_rows(m)
            last[rank, tail - m :] = [pack(specs, state_at(rows_m, np.array([i])))[("int64", "sum")] for i in range(m)]
        parts.append(last.ravel())
    with asking(question):
        first = backend.all_reduce(np.concatenate(parts), op="sum")
    layout = [(int(first[r]), FLAGS[int(first[ws + r])], int(first[2 * ws + r])) for r in range(ws)]
    counts = [c for c, _, _ in layout]
    by_index = check_layout(layout, name)  # raises on every rank when only some gave indices
    if not by_index and question.get("coverage"):
        coverage.deliver(coverage.report_of_layout(counts, mode, size))
    if size is not None and size > sum(counts) and not by_index:
        warn_short(name, size, sum(counts))
    if sums_only and not by_index:
        dropped = [c - kept_count(counts, r, mode, size) for r, c in enumerate(counts)]
        if max(dropped) <= tail:
            warn_sharding(counts, mode, size, name)
            total = first[3 * ws : 3 * ws + width].copy()
            last_all = first[3 * ws + width :].reshape(ws, tail, width)
            for r, d in enumerate(dropped):
                total -= last_all[r, tail - d :].sum(axis=0)
            return computation.compute_metric(unpack(specs, {("int64", "sum"): total}))
    keep, _ = kept_samples(backend, question, layout, indices, mode, size, name)
    state = kept.whole_state(specs) if keep is None else state_at(kept.rows(), keep)
    with asking(question):
        packed = {key: backend.all_reduce(flat, op=key[1]) for key, flat in pack(specs, state).items()}
    return computation.compute_metric(unpack(specs, packed))
