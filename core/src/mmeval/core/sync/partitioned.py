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
   (``_partition``), by the owner of each key when it gave the keys' loads
   (``_part_loads``: summed over the world in the layout exchange that
   comes first anyway, and dealt by :func:`balanced_owners`);
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

import heapq
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..dist_backends.base_backend import BaseDistBackend
from ..dist_backends.transport import asking
from ..results import RankResults, select
from ..settings import logger
from .gather import SHARED_FAILURES, answered_by_rank0, pack_exception, plain_data_only, unpack_exception
from .ordering import dataset_positions
from .protocols import Call

if TYPE_CHECKING:
    from .protocols import PartsComputation


__all__ = [
    "ComputesInParts",
    "balanced_owners",
    "kept_positions",
    "part_loads_of",
    "partitioned_compute",
    "world_owners",
]


def kept_positions(
    backend: BaseDistBackend,
    question: Dict[str, Any],
    counts: Sequence[int],
    keep: Optional[np.ndarray],
    indices: Optional[np.ndarray],
    mode: str,
) -> np.ndarray:
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


def balanced_owners(loads: np.ndarray, world_size: int) -> np.ndarray:
    """Each key's rank (int64), the ranks' summed loads as even as a greedy deal makes them.

    The heaviest key first, each to the rank with the least load so far
    (longest-processing-time first: the largest rank load is at most 4/3 of
    the best possible); ties go to the lower key and to the rank with fewer
    keys, then the lower rank, so every rank that holds the same ``loads``
    deals the same owners. A long-tailed
    set of keys -- LVIS's few thousand-detection classes among a thousand rare
    ones -- dealt ``k % world_size`` instead leaves one rank with the large
    classes: in the LVIS-like benchmark data its largest share is 1.06x the
    mean at world size 2, 1.2x at 4 and 1.5x at 8, and 1.00x dealt here.
    """
    loads = np.asarray(loads, dtype=np.int64).reshape(-1)
    owners = np.zeros(loads.shape[0], dtype=np.int64)
    if world_size <= 1 or not loads.size:
        return owners
    order = np.lexsort((np.arange(loads.shape[0]), -loads)).tolist()
    heap = [(0, 0, r) for r in range(world_size)]  # (load so far, keys so far, rank): already a heap
    out = owners.tolist()
    for k, load in zip(order, loads[order].tolist()):
        total, n, r = heap[0]
        out[k] = r
        heapq.heapreplace(heap, (total + load, n + 1, r))
    return np.asarray(out, dtype=np.int64)


#: bits a key's load travels in: a rank's loads are scaled by a power of two to fit (a cost estimate
#: needs no more), so LVIS's 1,203 categories take 2.4 KB and ride inline in the exchange's 4 KiB slot
LOAD_BITS = 16


def part_loads_of(parts: "PartsComputation") -> Optional[Tuple[int, np.ndarray]]:
    """``parts._part_loads()`` as it travels -- ``(shift, uint16 loads rounded up after >> shift)`` -- or
    ``None`` when it gives none or they cannot be read."""
    try:
        loads = parts._part_loads()
        if loads is None:
            return None
        out = np.asarray(loads, dtype=np.int64).reshape(-1)
        if out.size and int(out.min()) < 0:
            raise ValueError(f"negative loads: {out[out < 0][:5].tolist()}")
        shift = max(0, int(out.max(initial=0)).bit_length() - LOAD_BITS)
        scaled = (out + ((1 << shift) - 1)) >> shift  # rounded up: a key with some load keeps some
        return shift, scaled.astype(np.uint16)
    except Exception as exc:  # only the balance depends on it: every rank falls back to owners=None
        logger().debug("mmeval: %s._part_loads() failed (the parts are not balanced): %r", parts.name, exc)
        return None


def world_owners(loads: Sequence[Optional[Tuple[int, np.ndarray]]], world_size: int) -> Optional[np.ndarray]:
    """Each key's owner from every rank's loads as :func:`part_loads_of` sends them (the same list on every
    rank), or ``None`` unless every rank gave loads for the same number of keys."""
    try:
        arrays = [np.asarray(x[1], dtype=np.int64).reshape(-1) << int(x[0]) for x in loads if x is not None]
    except (TypeError, ValueError, IndexError):
        return None
    if not arrays or len(arrays) != len(loads):
        return None
    if len({a.shape[0] for a in arrays}) != 1:
        return None
    return balanced_owners(np.sum(arrays, axis=0), world_size)


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


def partitioned_compute(
    kept: RankResults,
    call: Call,
    backend: BaseDistBackend,
    computation: "PartsComputation",
    counts: Sequence[int],
    keep: Optional[np.ndarray],
    indices: Optional[np.ndarray],
    owners: Optional[np.ndarray] = None,
) -> Dict[str, Any]:
    """The partitioned path (see the module docstring); every rank returns the same result or raises.

    ``kept`` is what this rank kept, ``counts`` every rank's number of results,
    ``keep`` / ``indices`` which of this rank's count; ``computation`` splits,
    computes the parts and combines them. ``owners``: each key's rank
    (:func:`world_owners`), given to ``_partition`` by keyword when not ``None``.
    """
    rank, ws = backend.rank, backend.world_size
    question, name = call.question, call.name
    plain = plain_data_only(backend)
    failure: Optional[Tuple[str, Dict[str, Any]]] = None
    positions = kept_positions(backend, question, counts, keep, indices, call.mode)
    parts: List[Any] = [None] * ws
    try:
        results = kept.merged()
        local = list(results if keep is None else select(results, keep))
        parts = list(
            computation._partition(local, positions, ws)
            if owners is None
            else computation._partition(local, positions, ws, owners=owners)
        )
        if len(parts) != ws:
            raise RuntimeError(f"{name}._partition() returned {len(parts)} parts for {ws} ranks")
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
            received = [
                (status, parts[rank] if r == rank and status == "ok" else value)
                for r, (status, value) in enumerate(got)
            ]
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
                partial = ("ok", computation._compute_part(values))
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
            raise unpack_exception(errors[0], name, trusted=not plain)
        return computation._combine_parts([value for _, value in partials])

    return answered_by_rank0(backend, name, plain, combine)


class ComputesInParts:
    """The defaults of the partitioned path's extension points, which :class:`~mmeval.core.base_metric.BaseMetric`
    inherits: a metric computes in parts once it overrides them (the contract:
    :class:`~mmeval.core.sync.protocols.PartsComputation`)."""

    @property
    def name(self) -> str:
        return type(self).__name__

    def _computes_in_parts(self) -> bool:
        """Whether :meth:`compute` across ranks takes the partitioned path (the same answer on every rank).

        A per-sample metric whose work splits by a key of its own returns
        ``True`` and implements :meth:`_partition`, :meth:`_compute_part` and
        :meth:`_combine_parts` (and may give :meth:`_part_loads`), as
        :class:`~mmeval.core.sync.protocols.PartsComputation` documents them.
        """
        return False

    def _partition(
        self, results: List[Any], positions: np.ndarray, world_size: int, owners: Optional[np.ndarray] = None
    ) -> List[Any]:
        """This rank's counted results in ``world_size`` parts (:meth:`PartsComputation._partition`)."""
        raise NotImplementedError(f"{self.name} computes in parts but does not implement _partition()")

    def _part_loads(self) -> Optional[np.ndarray]:
        """The work this rank's results bring to each key, or ``None`` (:meth:`PartsComputation._part_loads`)."""
        return None

    def _compute_part(self, parts: List[Any]) -> Any:
        """The partial result of the parts sent to this rank (:meth:`PartsComputation._compute_part`)."""
        raise NotImplementedError(f"{self.name} computes in parts but does not implement _compute_part()")

    def _combine_parts(self, partials: List[Any]) -> Dict[str, Any]:
        """The metric from every rank's partial result, on rank 0 (:meth:`PartsComputation._combine_parts`)."""
        raise NotImplementedError(f"{self.name} computes in parts but does not implement _combine_parts()")
