"""The backend conformance suite: the same checks for every backend, ours and yours.

Launch your ranks however your runtime wants (spawn, ``mpiexec``,
``horovodrun``, ...) and call, on every rank::

    from mmeval.testing.conformance import check_backend
    report = check_backend(backend)        # raises AssertionError on the first violation

``check_backend`` runs a fixed sequence of collectives (the same on every
rank, so a failing check cannot desynchronize the others before it raises)
and returns the names of the checks that passed. ``faults=True`` adds the
checks that need a backend to report a failure on every rank (an
unpicklable object on one rank); backends built on
:class:`~mmeval.core.dist_backends.FramedDistBackend` pass them, old-style
backends implementing only the five abstract members usually cannot (the
other ranks would wait), so the default is ``faults=None``: on for framed
backends only.

The module imports no framework; it needs numpy.
"""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..core.dist_backends.base_backend import BaseDistBackend
from ..core.dist_backends.framed_backend import FramedDistBackend
from ..core.errors import ShardingWarning
from .reduction_checks import (
    REDUCTION_DTYPES,
    REDUCTION_EXTRA_DTYPES,
    REDUCTION_SHAPES,
    check_reduction_dtypes,
    check_reduction_mismatch,
    check_reduction_nan,
    check_reductions,
    expected_reduction,
    reduction_input,
)

__all__ = [
    "check_backend",
    "CHECKS",
    "FAULT_CHECKS",
    "TERMINAL_CHECKS",
    "expected_payload",
    "shard_indices",
    "reduction_input",
    "expected_reduction",
    "REDUCTION_DTYPES",
    "REDUCTION_SHAPES",
    "REDUCTION_EXTRA_DTYPES",
]


def expected_payload(rank: int, size: int = 64) -> Dict[str, Any]:
    """A deterministic nested object for ``rank``: what peers must receive exactly."""
    return {
        "rank": rank,
        "text": f"rank-{rank}-ü",
        "nested": [rank, (rank * 1.5, None, True), {"k": b"\x00\xff" * rank}],
        "array": np.arange(size, dtype=np.float64) * (rank + 1),
        "ints": np.arange(size % 7 + rank, dtype=np.int32),
        "scalar": np.float32(rank / 3),  # NumPy 1.x: float32 / int is float64
    }


def _assert_payload(got: Any, rank: int, size: int, where: str) -> None:
    want = expected_payload(rank, size)
    assert isinstance(got, dict), f"{where}: expected a dict from rank {rank}, got {type(got).__name__}"
    assert set(got) == set(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
    for key in ("rank", "text", "nested"):
        assert got[key] == want[key], f"{where}: {key!r} from rank {rank} is {got[key]!r}, expected {want[key]!r}"
    for key in ("array", "ints"):
        assert isinstance(got[key], np.ndarray), f"{where}: {key!r} is not an ndarray"
        assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape, f"{where}: {key!r} changed"
        assert np.array_equal(got[key], want[key]), f"{where}: {key!r} from rank {rank} has other values"
    assert type(got["scalar"]) is np.float32 and got["scalar"] == want["scalar"], f"{where}: numpy scalar changed"


def shard_indices(n: int, rank: int, ws: int, how: str) -> List[int]:
    """The sample indices of ``rank``: ``'padded'`` (DistributedSampler), ``'uneven'`` or ``'blocks'``."""
    if how == "padded":
        total = -(-n // ws) * ws
        return (list(range(n)) + list(range(total - n)))[rank::ws]
    if how == "uneven":
        return list(range(n))[rank::ws]
    per = -(-n // ws)
    return list(range(n))[rank * per : (rank + 1) * per]


def _check_identity(b: BaseDistBackend) -> None:
    assert isinstance(b.is_initialized, bool), "is_initialized must be a bool"
    ws, rank = b.world_size, b.rank
    assert isinstance(ws, int) and ws >= 1, f"world_size must be a positive int, got {ws!r}"
    assert isinstance(rank, int) and 0 <= rank < ws, f"rank {rank!r} is not in 0..{ws - 1}"
    assert isinstance(type(b).detect(), bool), "detect() must return a bool"


def _check_all_gather(b: BaseDistBackend) -> None:
    got = b.all_gather_object(expected_payload(b.rank))
    assert isinstance(got, list) and len(got) == b.world_size, f"all_gather_object returned {type(got).__name__}"
    for r, item in enumerate(got):
        _assert_payload(item, r, 64, "all_gather_object")


def _check_gather(b: BaseDistBackend) -> None:
    dst = b.world_size - 1
    got = b.gather_object(expected_payload(b.rank), dst=dst)
    if b.rank == dst:
        assert isinstance(got, list) and len(got) == b.world_size, "gather_object: dst must get a list"
        for r, item in enumerate(got):
            _assert_payload(item, r, 64, "gather_object")
    else:
        assert got is None, f"gather_object must return None off dst, got {type(got).__name__}"


def _check_broadcast(b: BaseDistBackend) -> None:
    for src in range(b.world_size):
        obj = expected_payload(src) if b.rank == src else None
        _assert_payload(b.broadcast_object(obj, src=src), src, 64, f"broadcast_object(src={src})")


def _check_barrier(b: BaseDistBackend) -> None:
    for _ in range(3):
        b.barrier()


def _check_empty(b: BaseDistBackend) -> None:
    empties: Tuple[Any, ...] = (b"", [], {}, None, ())
    for empty in empties:
        got = b.all_gather_object(empty)
        assert got == [empty] * b.world_size, f"all_gather_object({empty!r}) returned {got!r}"
    assert b.broadcast_object(b"" if b.rank == 0 else None, src=0) == b""


def _check_large(b: BaseDistBackend, size: int = 1_000_000) -> None:
    got = b.all_gather_object(expected_payload(b.rank, size))
    for r, item in enumerate(got):
        _assert_payload(item, r, size, "all_gather_object (8 MB per rank)")
    big = b.broadcast_object(expected_payload(0, size) if b.rank == 0 else None, src=0)
    _assert_payload(big, 0, size, "broadcast_object (8 MB)")


def _check_per_sample_lists(b: BaseDistBackend) -> None:
    rows = [(i * b.world_size + b.rank, np.full(4, i, dtype=np.float32)) for i in range(2000)]
    got = b.all_gather_object(rows)
    for r, part in enumerate(got):
        assert len(part) == 2000, f"rank {r}'s list of per-sample tuples lost items"
        label, arr = part[1999]
        assert label == 1999 * b.world_size + r and type(label) is int
        assert arr.dtype == np.float32 and np.array_equal(arr, np.full(4, 1999, dtype=np.float32))


def _check_accuracy(b: BaseDistBackend) -> None:
    from ..metrics.accuracy import Accuracy

    n = 1000 + 3 * b.world_size + 1  # never a multiple of the world size (for ws > 1)
    if b.world_size > 1 and n % b.world_size == 0:
        n += 1
    rng = np.random.default_rng(1234)
    scores = rng.random((n, 7)).astype(np.float32)
    labels = rng.integers(0, 7, n)
    expected = Accuracy(topk=(1, 3), thrs=(None, 0.5))(scores, labels)
    for how, mode in (("padded", "unzip"), ("uneven", "unzip"), ("blocks", "cat")):
        idx = shard_indices(n, b.rank, b.world_size, how)
        acc = Accuracy(topk=(1, 3), thrs=(None, 0.5), dist_backend=b, dist_collect_mode=mode)
        for start in range(0, len(idx), 32):
            batch = idx[start : start + 32]
            acc.add(scores[batch], labels[batch])
        got = acc.compute(size=n)
        assert got == expected, f"Accuracy over {how} shards ({mode}): {got} != single-process {expected}"


def _check_compute_metric_error(b: BaseDistBackend) -> None:
    from ..metrics.accuracy import Accuracy

    class Failing(Accuracy):
        def compute_metric(self, results: Any) -> Dict[str, float]:
            raise ValueError("conformance: compute_metric failed on purpose")

    m = Failing(dist_backend=b)
    m.add(np.eye(2)[[b.rank % 2]], [0])
    try:
        m.compute()
    except ValueError as exc:
        assert "failed on purpose" in str(exc), f"compute_metric error lost its message: {exc}"
    else:
        raise AssertionError("compute_metric raised on the computing rank but not on this one")


def _check_unpicklable(b: BaseDistBackend) -> None:
    if b.world_size < 2:
        return
    obj: Any = threading.Lock() if b.rank == 1 else {"fine": b.rank}
    try:
        b.all_gather_object(obj)
    except Exception as exc:
        assert "1" in str(exc), f"the error should name the failing rank: {exc}"
    else:
        raise AssertionError("an unpicklable object on rank 1 did not raise on this rank")
    # the group is still usable afterwards
    assert b.all_gather_object(b.rank) == list(range(b.world_size))


CHECKS: Dict[str, Callable[[BaseDistBackend], None]] = {
    "identity": _check_identity,
    "all_gather_object": _check_all_gather,
    "gather_object": _check_gather,
    "broadcast_object": _check_broadcast,
    "barrier": _check_barrier,
    "empty_payloads": _check_empty,
    "large_payloads": _check_large,
    "per_sample_lists": _check_per_sample_lists,
    "accuracy_end_to_end": _check_accuracy,
    "compute_metric_error": _check_compute_metric_error,
    "reductions": check_reductions,
    "reduction_dtypes": check_reduction_dtypes,
    "reduction_nan": check_reduction_nan,
}


def _check_question_mismatch(b: BaseDistBackend) -> None:
    """Ranks computing with a different configuration or size all raise, naming the field; the group stays usable."""
    from ..core.errors import CollectiveMismatchError
    from ..metrics.accuracy import Accuracy

    if b.world_size < 2:
        return
    for topk, size, field in (((1, 2) if b.rank == 1 else (1,), 4, "topk"), ((1,), 3 if b.rank == 1 else 4, "size")):
        acc = Accuracy(topk=topk, dist_backend=b)
        acc.add(np.eye(3)[[0, 1]], [0, 1])
        try:
            acc.compute(size=size)
        except CollectiveMismatchError as exc:
            assert field in str(exc) and "rank 1" in str(exc), (
                f"the mismatch error should name {field!r} and rank 1: {exc}"
            )
        else:
            raise AssertionError(f"ranks computed with different {field} and this rank got an answer")
    assert b.all_gather_object(b.rank) == list(range(b.world_size)), "the group must stay usable after a mismatch"


FAULT_CHECKS: Dict[str, Callable[[BaseDistBackend], None]] = {
    "unpicklable_on_one_rank": _check_unpicklable,
    "question_mismatch": _check_question_mismatch,
    "reduction_mismatch": check_reduction_mismatch,
}

#: A fresh backend over a new group, built by every rank at the same point: ``fresh(timeout=seconds)``.
Fresh = Callable[..., BaseDistBackend]

#: Timeout of the fresh backends the terminal checks use (seconds).
TERMINAL_TIMEOUT = 3.0


def _fresh_group(fresh: Fresh, timeout: float) -> Optional[BaseDistBackend]:
    """A backend over a new group, its ranks lined up; ``None`` at world size 1 (nothing to check)."""
    b = fresh(timeout=timeout)
    if b.world_size < 2:
        return None
    b.barrier()
    return b


def _check_poisoning(fresh: Fresh) -> bool:
    """A rank that stays away makes the others time out; every later call there raises at once, naming it."""
    from ..core.errors import DistCommunicationError, GroupPoisonedError

    b = _fresh_group(fresh, TERMINAL_TIMEOUT)
    if b is None:
        return False
    ws, rank = b.world_size, b.rank
    late = ws - 1
    if rank == late:
        time.sleep(TERMINAL_TIMEOUT + 1.0)
        for _ in range(2):  # the first call may complete the collective the others gave up; the next cannot
            try:
                b.all_gather_object({"late": rank, "data": np.zeros(8192)})
            except DistCommunicationError:
                return True
        raise AssertionError("the late rank's peers gave up, yet two more collectives succeeded here")
    started = time.monotonic()
    try:
        b.all_gather_object({"rank": rank, "data": np.zeros(8192)})
    except DistCommunicationError as exc:
        first = str(exc)
    else:
        raise AssertionError(f"rank {late} never came, yet all_gather_object returned")
    assert time.monotonic() - started < TERMINAL_TIMEOUT + 5, "the timeout was not honoured"
    started = time.monotonic()
    try:
        b.all_gather_object(rank)
    except GroupPoisonedError as exc:
        assert "unusable" in str(exc) and "#" in str(exc), f"the refusal should name the first failure: {exc}"
        assert time.monotonic() - started < 1.0, "a poisoned group must refuse at once"
    else:
        raise AssertionError(f"after {first!r}, a collective on the same group did not raise GroupPoisonedError")
    return True


def _check_concurrent_calls(fresh: Fresh) -> bool:
    """Two threads calling collectives on one group: refused or raised, never answered with mixed objects."""
    from ..core.errors import DistCommunicationError

    b = _fresh_group(fresh, TERMINAL_TIMEOUT)
    if b is None:
        return False
    rank = b.rank
    outcomes: Dict[str, Any] = {}

    def call(label: str, delay: float) -> None:
        time.sleep(delay)
        try:
            outcomes[label] = b.all_gather_object((label, rank))
        except DistCommunicationError as exc:
            outcomes[label] = exc

    # every rank's main thread is inside a collective when its side thread calls; rank 0's main comes last
    side = threading.Thread(target=call, args=("side", 1.0), name="mmeval-conformance-side")
    side.start()
    call("main", 2.0 if rank == 0 else 0.0)
    side.join(TERMINAL_TIMEOUT * 3 + 5)
    assert not side.is_alive(), "the side thread's collective did not end"
    for label, out in outcomes.items():
        if isinstance(out, list):
            labels = {item[0] for item in out}
            assert len(labels) == 1, f"{label} thread got objects of several threads mixed: {out}"
    assert any(isinstance(o, BaseException) for o in outcomes.values()), (
        f"two threads called collectives on one group at once and neither raised: {outcomes}"
    )
    return True


def _check_interrupt(fresh: Fresh) -> bool:
    """SIGINT while waiting for a late peer raises KeyboardInterrupt within 1 s; the group is then poisoned."""
    import os
    import signal

    from ..core.errors import DistCommunicationError, GroupPoisonedError

    main = threading.current_thread() is threading.main_thread() and hasattr(signal, "SIGINT")
    b = fresh(timeout=TERMINAL_TIMEOUT * 2)
    ws, rank = b.world_size, b.rank
    if ws < 2 or not b.all_gather_object(main) == [True] * ws:  # signals reach the main thread only
        return False
    b.barrier()
    if rank != 0:
        time.sleep(TERMINAL_TIMEOUT)  # late: rank 0 is interrupted while it waits for this rank
        for _ in range(2):
            try:
                b.all_gather_object(rank)
            except DistCommunicationError:
                break
        return True
    sent = [0.0]

    def interrupt() -> None:
        sent[0] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    timer = threading.Timer(1.0, interrupt)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer.start()
    try:
        b.all_gather_object(rank)
    except KeyboardInterrupt:
        latency = time.monotonic() - sent[0]
        assert latency < 1.0, f"KeyboardInterrupt surfaced {latency:.2f} s after SIGINT (limit 1 s)"
    else:
        raise AssertionError("SIGINT during a collective did not raise KeyboardInterrupt")
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    try:
        b.all_gather_object(rank)
    except GroupPoisonedError:
        pass
    else:
        raise AssertionError("an interrupted collective must leave the group poisoned")
    return True


#: Checks that leave their group unusable: each runs on a backend from ``fresh`` and returns whether it ran.
TERMINAL_CHECKS: Dict[str, Callable[[Fresh], bool]] = {
    "poisoning": _check_poisoning,
    "concurrent_calls": _check_concurrent_calls,
    "interrupt": _check_interrupt,
}


def check_backend(
    backend: BaseDistBackend, *, faults: Optional[bool] = None, fresh: Optional[Fresh] = None
) -> List[str]:
    """Run every conformance check on this rank; every rank of the group must call it.

    ``fresh``: a callable returning a new backend of the same kind over a
    *new* group (``fresh(timeout=seconds)``; torch: over ``dist.new_group()``,
    MPI: over ``comm.Dup()``), called by every rank at the same point. With
    it (and ``faults``), the checks that leave a group unusable run too, each
    on its own fresh backend: poisoning after a timeout, two threads calling
    at once, Ctrl-C while waiting. Run ``check_backend`` in the main thread.

    Returns the names of the checks run; raises ``AssertionError`` (naming
    the check) on the first violation.
    """
    with warnings.catch_warnings():
        # the checks shard on purpose (padded, uneven, a sample per rank): the metric's warnings about it are ours
        warnings.simplefilter("ignore", ShardingWarning)
        return _run_checks(backend, faults, fresh)


def _run_checks(backend: BaseDistBackend, faults: Optional[bool], fresh: Optional[Fresh]) -> List[str]:
    if faults is None:
        faults = isinstance(backend, FramedDistBackend)
    checks = dict(CHECKS)
    if faults:
        checks.update(FAULT_CHECKS)
    done = []
    for name, check in checks.items():
        try:
            check(backend)
        except AssertionError as exc:
            raise AssertionError(f"conformance check {name!r} failed on rank {backend.rank}: {exc}") from exc
        done.append(name)
    if faults and fresh is not None:
        for name, terminal in TERMINAL_CHECKS.items():
            backend.barrier()  # the previous check left ranks seconds apart; line them up on the healthy group
            try:
                ran = terminal(fresh)
            except AssertionError as exc:
                raise AssertionError(f"conformance check {name!r} failed on rank {backend.rank}: {exc}") from exc
            if ran:  # a world of one (or no main thread, for the interrupt) has nothing to check
                done.append(name)
    return done
