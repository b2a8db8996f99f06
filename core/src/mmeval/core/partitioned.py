"""The partitioned per-sample path: every rank computes on a part of the world's summaries.

A per-sample metric whose work splits by a key of its own -- ``COCODetection``
accumulates each category on its own -- returns ``True`` from
:meth:`BaseMetric._computes_in_parts <mmeval.core.base_metric.BaseMetric._computes_in_parts>`
and implements three methods. :meth:`~mmeval.core.base_metric.BaseMetric.compute`
then, once it has chose which samples count (as the gather path does):

1. gives the metric this rank's kept results and their dataset positions
   (0 .. n-1 over the world's counted samples, exactly the order the gather
   path would put them in: by index with ``indices=``, else by
   ``dist_collect_mode``); the metric splits them into one part per rank
   (``_partition``);
2. sends part ``r`` to rank ``r`` (one ``gather_object`` per rank; a rank's own
   part never leaves it);
3. every rank computes a partial result from the parts it received, in rank
   order (``_compute_part``);
4. rank 0 gathers the partials, combines them (``_combine_parts``) and
   broadcasts the result -- or the first exception raised on any rank, at
   any step -- to every rank.

Every collective carries the question (:mod:`mmeval.core.dist_backends.transport`),
and a rank that fails at any step keeps taking part with an error marker
instead of its data, so no rank waits for one that gave up. Cost: each rank
sends its summaries once ((ws-1)/ws of them leave it) and its partial; a rank
holds its own summaries and the parts it computes on, never the world's; with
``indices=`` one all-gather of the counted indices (8 bytes each) gives the
positions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .dist_backends.base_backend import BaseDistBackend
from .dist_backends.transport import asking
from .gather import SHARED_FAILURES, answered_by_rank0, pack_exception, plain_data_only, unpack_exception
from .ordering import dataset_positions
from .results import select

if TYPE_CHECKING:
    from .base_metric import BaseMetric

__all__ = ["kept_positions", "partitioned_compute"]


def kept_positions(backend: BaseDistBackend, question: Dict[str, Any], counts: Sequence[int],
                   keep: Optional[np.ndarray], indices: Optional[np.ndarray], mode: str) -> np.ndarray:
    """Each counted sample of this rank's place in dataset order among the world's counted samples.

    With ``indices`` (the rank's indices, ``keep`` the positions it counts) one
    all-gather of the counted indices ranks them; else the place follows
    ``mode`` (``'cat'``: rank after rank; ``'unzip'``: round-robin), and
    ``keep`` (a mask of the samples before ``size``) keeps a prefix of the
    dataset order, so the places are 0 .. n-1 already.
    """
    rank = backend.rank
    if indices is not None:
        mine = indices if keep is None else indices[keep]
        with asking(question):
            every = backend.all_gather_object(np.sort(mine))
        world = np.sort(np.concatenate([np.asarray(e, dtype=np.int64) for e in every]))
        return np.asarray(np.searchsorted(world, mine), dtype=np.int64)
    pos = dataset_positions(counts, rank, mode)
    return pos if keep is None else pos[keep]


def _failed(step: str, rank: int, exc: BaseException) -> Tuple[str, Dict[str, Any]]:
    """An error marker for ``exc``: the same exception type, its message naming the rank and the step."""
    message = f"{exc} (rank {rank}, {step})"
    marked = exc
    try:
        again = type(exc)(message)
        if str(again) == message:
            marked = again
    except Exception:  # a type not built from one message: it travels as it is, the note in "message"
        pass
    packed = pack_exception(marked)
    packed["message"] = message
    return "error", packed


def partitioned_compute(metric: "BaseMetric", backend: BaseDistBackend, question: Dict[str, Any],
                        counts: Sequence[int], keep: Optional[np.ndarray], indices: Optional[np.ndarray]
                        ) -> Dict[str, Any]:
    """The partitioned path (see the module docstring); every rank returns the same result or raises."""
    rank, ws = backend.rank, backend.world_size
    plain = plain_data_only(backend)
    failure: Optional[Tuple[str, Dict[str, Any]]] = None
    positions = kept_positions(backend, question, counts, keep, indices, metric.dist_collect_mode)
    parts: List[Any] = [None] * ws
    try:
        results = metric._local_results()
        local = list(results if keep is None else select(results, keep))
        parts = list(metric._partition(local, positions, ws))
        if len(parts) != ws:
            raise RuntimeError(f"{metric.name}._partition() returned {len(parts)} parts for {ws} ranks")
        del local, results
    except Exception as exc:
        failure = _failed("splitting its summaries", rank, exc)
    received: List[Any] = []
    for dst in range(ws):
        payload = failure if failure is not None else ("ok", None if dst == rank else parts[dst])
        try:
            with asking(question):
                got = backend.gather_object(payload, dst=dst)
        except SHARED_FAILURES:
            raise  # every rank of the group raises these together
        except Exception as exc:  # this rank alone (e.g. it could not decode a peer's part): go on, marked
            failure = failure or _failed("receiving the parts sent to it by the other ranks", rank, exc)
            got = None
        if dst == rank and got is not None:
            received = [(status, parts[rank] if r == rank and status == "ok" else value)
                        for r, (status, value) in enumerate(got)]
        if dst != rank:
            parts[dst] = None  # sent: its memory goes now (no name below may hold it)
        del payload, got
    partial: Tuple[str, Any]
    if failure is not None:
        partial = failure
    else:
        errors = [value for status, value in received if status == "error"]
        if errors:
            partial = ("error", errors[0])
        else:
            values = [value for _, value in received]
            received = []
            try:
                partial = ("ok", metric._compute_part(values))
            except Exception as exc:
                partial = _failed("computing its part", rank, exc)
            del values
    del received, parts
    with asking(question):
        partials = backend.gather_object(partial, dst=0)

    def combine() -> Dict[str, Any]:
        assert partials is not None
        errors = [value for status, value in partials if status == "error"]
        if errors:
            raise unpack_exception(errors[0], metric.name, trusted=not plain)
        return metric._combine_parts([value for _, value in partials])

    return answered_by_rank0(backend, metric.name, plain, combine)
