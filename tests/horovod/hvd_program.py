"""One rank of the horovod backend tests; launched by test_horovod_backends.py under horovodrun.

    horovodrun -np N --gloo -H localhost:N --network-interfaces lo \\
        python tests/horovod/hvd_program.py torch|tensorflow OUT_DIR

Every rank runs the same checks in the same order (the conformance suite of
mmeval.testing with its terminal checks, each on a fresh group -- the global
process set under a new namespace --, then the horovod-specific ones), records
each outcome, and
writes ``OUT_DIR/rank<R>.json`` -- ``{check: {"ok": bool, "error": str,
"info": {...}}}`` -- once the checks that leave the group usable are done.
The timeout check breaks the group, so it runs last and is written to
``OUT_DIR/rank<R>.timeout.json``. Output on stdout is for debugging only.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
import traceback
from typing import Any, Callable, Dict, List

import numpy as np

FLAVOUR = sys.argv[1]
OUT_DIR = sys.argv[2]
#: the backend's collective timeout in the functional checks: a broken check fails fast instead of hanging
CHECK_TIMEOUT = 120.0
#: the timeout of the timeout check itself
SHORT_TIMEOUT = 2.0

if FLAVOUR == "torch":
    import horovod.torch as hvd
    import torch

    from mmeval_horovod import TorchHorovodDist as Backend

    def to_tensor(a: np.ndarray) -> Any:
        return torch.as_tensor(a)

    TENSOR_TYPE = torch.Tensor
elif FLAVOUR == "tensorflow":
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from mmeval_horovod import TFHorovodDist as Backend

    def to_tensor(a: np.ndarray) -> Any:
        return tf.constant(a)

    TENSOR_TYPE = tf.Tensor
else:
    raise SystemExit(f"unknown flavour {FLAVOUR!r}: use torch or tensorflow")

from mmeval.core.base_metric import RemoteMetricError  # noqa: E402
from mmeval.core.dist import get_dist_backend, resolve_backend_name  # noqa: E402
from mmeval.core.errors import (  # noqa: E402
    CollectiveMismatchError,
    CollectiveTimeoutError,
    GroupPoisonedError,
    RemoteSerializationError,
)
from mmeval.metrics import Accuracy  # noqa: E402
from mmeval.testing import conformance  # noqa: E402

DETECT_BEFORE_INIT = Backend.detect()
WS_ENV = int(os.environ.get("HOROVOD_SIZE", "0"))
# ranks 0 and N-1 form a process set when there are at least 3 processes
PS_RANKS = [0, WS_ENV - 1] if WS_ENV >= 3 else None
process_set = hvd.ProcessSet(PS_RANKS) if PS_RANKS else None
hvd.init(process_sets=[process_set] if process_set is not None else None)

backend = Backend(timeout=CHECK_TIMEOUT)
RANK, WS = backend.rank, backend.world_size


# --------------------------------------------------------------------------
# horovod-specific checks
# --------------------------------------------------------------------------


def check_runtime(b: Any) -> Dict[str, Any]:
    auto = resolve_backend_name("auto")
    assert b.is_initialized is True
    assert (b.rank, b.world_size) == (hvd.rank(), hvd.size()), (b.rank, b.world_size, hvd.rank(), hvd.size())
    assert Backend.detect() is True, "detect() after hvd.init()"
    assert DETECT_BEFORE_INIT is False, "detect() before hvd.init()"
    assert auto == Backend.name, f"auto-selection picked {auto!r}"
    assert type(get_dist_backend(Backend.name)) is Backend
    return {"rank": b.rank, "world_size": b.world_size, "auto": auto}


def check_broadcast_none_elsewhere(b: Any) -> Dict[str, Any]:
    # Horovod's own broadcast_object names the op after type(obj): dict on the root, NoneType elsewhere -> hang.
    for src in range(b.world_size):
        obj = {"from": src, "payload": list(range(10))} if b.rank == src else None
        got = b.broadcast_object(obj, src=src)
        assert got == {"from": src, "payload": list(range(10))}, got
        big = b.broadcast_object(np.full(100_000, src, dtype=np.int16) if b.rank == src else None, src=src)
        assert big.dtype == np.int16 and big.shape == (100_000,) and int(big[-1]) == src
    # different types on every rank in one all-gather (another name clash for type-named ops)
    mine: Any = [{"r": 0}, None, "two", 3.0][b.rank % 4]
    got_all = b.all_gather_object(mine)
    assert got_all == [[{"r": 0}, None, "two", 3.0][r % 4] for r in range(b.world_size)], got_all
    return {}


def check_mixed_sizes(b: Any) -> Dict[str, Any]:
    # rank 0 inline (small), the others out of the slot, all of different sizes: no padding needed
    sizes = [10 if r == 0 else 5000 * r + 17 for r in range(b.world_size)]
    payload = bytes([b.rank]) * sizes[b.rank]
    got = b.all_gather_object(payload)
    assert [len(x) for x in got] == sizes and all(x == bytes([r]) * sizes[r] for r, x in enumerate(got))
    for dst in range(b.world_size):
        g = b.gather_object(payload, dst=dst)
        if b.rank == dst:
            assert g is not None and [len(x) for x in g] == sizes
            assert all(x == bytes([r]) * sizes[r] for r, x in enumerate(g))
        else:
            assert g is None, "gather_object must return None off dst"
    # received arrays are writable, independent copies
    arr = b.all_gather_object(np.arange(3000, dtype=np.float64) + b.rank)[0]
    arr += 1
    # and so are gathered ones (views of the root's alltoall output, lent without a copy under tf_horovod)
    gathered = b.gather_object(np.arange(3000, dtype=np.float64) + b.rank, dst=0)
    if gathered is not None:
        gathered[1] += 1
        assert [float(a[0]) for a in gathered] == [r + (r == 1) for r in range(b.world_size)], gathered
    return {}


def _accuracy_inputs(n: int) -> Any:
    rng = np.random.default_rng(7)
    return rng.random((n, 5)).astype(np.float32), rng.integers(0, 5, n).astype(np.int64)


def check_accuracy_framework_tensors(b: Any) -> Dict[str, Any]:
    n = 103 if 103 % b.world_size else 104  # not a multiple of the world size
    scores, labels = _accuracy_inputs(n)
    expected = Accuracy(topk=(1, 2))(scores, labels)
    out: Dict[str, Any] = {"expected": expected}
    for how, mode, size in (("padded", "unzip", n), ("uneven", "unzip", None), ("blocks", "cat", n)):
        idx = conformance.shard_indices(n, b.rank, b.world_size, how)
        acc = Accuracy(topk=(1, 2), dist_backend=b, dist_collect_mode=mode)
        for start in range(0, len(idx), 8):
            batch = idx[start : start + 8]
            pred_t, lab_t = to_tensor(scores[batch]), to_tensor(labels[batch])
            assert isinstance(pred_t, TENSOR_TYPE)
            acc.add(pred_t, lab_t)
        got = acc.compute(size=size)
        assert got == expected, f"{how} shards, {mode}, size={size}: {got} != {expected}"
        out[how] = got
    # compute() with no name resolves to this backend (auto) and gives the same
    acc = Accuracy(topk=(1, 2))
    idx = conformance.shard_indices(n, b.rank, b.world_size, "padded")
    acc.add(to_tensor(scores[idx]), to_tensor(labels[idx]))
    assert acc.compute(size=n) == expected
    return out


def _expect_error(call: Callable[[], Any], exc_type: type) -> BaseException:
    try:
        call()
    except exc_type as exc:
        return exc
    raise AssertionError(f"expected {exc_type.__name__}, nothing was raised")


def check_unpicklable(b: Any) -> Dict[str, Any]:
    bad = threading.Lock()
    messages: List[str] = []
    bad_rank = b.world_size - 1
    exc = _expect_error(lambda: b.all_gather_object(bad if b.rank == bad_rank else b.rank), RemoteSerializationError)
    messages.append(str(exc))
    exc = _expect_error(lambda: b.gather_object(bad if b.rank == 0 else b.rank, dst=bad_rank), RemoteSerializationError)
    messages.append(str(exc))
    exc = _expect_error(
        lambda: b.broadcast_object(bad if b.rank == bad_rank else None, src=bad_rank), RemoteSerializationError
    )
    messages.append(str(exc))
    # the group is still usable afterwards
    assert b.all_gather_object(b.rank) == list(range(b.world_size))
    return {"messages": messages}


class _Boom(ValueError):
    pass


class _Unpicklable(Exception):
    def __init__(self, a: int, b: int) -> None:  # pickle cannot rebuild it from its args
        super().__init__(f"unpicklable failure {a}/{b}")


class _FailingAccuracy(Accuracy):
    def __init__(self, exc: BaseException, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.exc = exc

    def add(self, *batch: Any) -> None:  # type: ignore[override]
        self._results.append(tuple(np.asarray(b) for b in batch))  # object results: the per-sample path

    def compute_metric(self, results: Any) -> Dict[str, float]:
        raise self.exc


def check_compute_metric_raises(b: Any) -> Dict[str, Any]:
    m = _FailingAccuracy(ValueError("compute_metric failed: 42 is not a score"), dist_backend=b)
    m.add(to_tensor(np.eye(3, dtype=np.float32)[[b.rank % 3]]), to_tensor(np.array([0])))
    exc = _expect_error(m.compute, ValueError)
    assert type(exc) is ValueError and str(exc) == "compute_metric failed: 42 is not a score", repr(exc)
    m2 = _FailingAccuracy(_Unpicklable(1, 2), dist_backend=b)
    m2.add(to_tensor(np.eye(3, dtype=np.float32)[[0]]), to_tensor(np.array([1])))
    if b.rank == 0:
        exc2 = _expect_error(m2.compute, _Unpicklable)
        return {"type": type(exc).__name__, "message": str(exc), "type2": type(exc2).__name__}
    exc2 = _expect_error(m2.compute, RemoteMetricError)
    assert exc2.remote_type.endswith("_Unpicklable") and exc2.remote_message == "unpicklable failure 1/2", exc2
    return {"type": type(exc).__name__, "message": str(exc), "type2": type(exc2).__name__}


def check_process_set(b: Any) -> Dict[str, Any]:
    if process_set is None:
        return {"skipped": "needs 3 processes"}
    member = hvd.rank() in PS_RANKS
    sub = Backend(process_set, timeout=CHECK_TIMEOUT)
    info: Dict[str, Any] = {"member": member}
    if member:
        assert (sub.rank, sub.world_size) == (PS_RANKS.index(hvd.rank()), 2), (sub.rank, sub.world_size)
        got = sub.all_gather_object({"global": hvd.rank()})
        assert got == [{"global": r} for r in PS_RANKS], got
        # src / dst are ranks within the set: 1 is global rank N-1
        assert sub.broadcast_object(("big", bytes(9000)) if sub.rank == 1 else None, src=1) == ("big", bytes(9000))
        g = sub.gather_object(bytes(6000) + bytes([hvd.rank()]), dst=1)
        if sub.rank == 1:
            assert g is not None and [x[-1] for x in g] == PS_RANKS
        else:
            assert g is None
        sub.barrier()
        n = 31
        scores, labels = _accuracy_inputs(n)
        acc = Accuracy(dist_backend=sub)
        idx = conformance.shard_indices(n, sub.rank, 2, "padded")
        acc.add(to_tensor(scores[idx]), to_tensor(labels[idx]))
        assert acc.compute(size=n) == Accuracy()(scores, labels)
        info["rank"] = sub.rank
    else:
        exc = _expect_error(lambda: sub.rank, RuntimeError)
        assert "not part of" in str(exc) and Backend.name in str(exc), str(exc)
        info["error"] = str(exc)
    b.barrier()  # everyone, members or not
    return info


def check_name_collision_free(b: Any) -> Dict[str, Any]:
    # two backend objects over one group share one operation sequence: no clash, no mix-up
    other = Backend(timeout=CHECK_TIMEOUT)
    for i in range(5):
        first, second = (b, other) if i % 2 else (other, b)
        assert first.all_gather_object((i, b.rank)) == [(i, r) for r in range(b.world_size)]
        assert second.broadcast_object("x" * 5000 if b.rank == 0 else None) == "x" * 5000
    return {}


def check_extra_collective(b: Any) -> Dict[str, Any]:
    # Rank 0 calls one collective more than the others (a barrier before their all-gather): the header
    # exchange, named the same for every collective, pairs the two, and every rank raises at once.
    start = time.monotonic()
    if b.rank == 0:
        exc = _expect_error(b.barrier, CollectiveMismatchError)
    else:
        exc = _expect_error(lambda: b.all_gather_object(np.zeros(100_000)), CollectiveMismatchError)
    elapsed = time.monotonic() - start
    assert "barrier" in str(exc) and "all_gather_object" in str(exc), str(exc)
    assert elapsed < CHECK_TIMEOUT, elapsed
    # the group is still usable afterwards
    assert b.all_gather_object(b.rank) == list(range(b.world_size))
    return {"elapsed": elapsed, "message": str(exc)}


def check_native_reduction(b: Any) -> Dict[str, Any]:
    # an array too large for the slot goes through Horovod's own allreduce, not the byte gather
    def no_byte_gather(*args: Any) -> Any:
        raise AssertionError("the large reduction fell back to the byte gather")

    local = Backend(timeout=CHECK_TIMEOUT, namespace="native-reduction")
    local._all_gather_bytes = no_byte_gather
    local._gather_bytes = no_byte_gather
    ws, rank = b.world_size, b.rank
    data = np.arange(20_000, dtype=np.int64) * (rank + 1)
    assert np.array_equal(local.all_reduce(data, "sum"), np.arange(20_000) * (ws * (ws + 1) // 2))
    biggest = local.all_reduce(data, "max")
    assert np.array_equal(biggest, np.arange(20_000) * ws)
    biggest += 1  # the result is the caller's to write (a view of the op's output under tf_horovod)
    got = local.reduce(np.full((100, 50), rank + 2, dtype=np.int64), "min", dst=ws - 1)
    assert (got is None) == (rank != ws - 1) and (got is None or np.all(got == 2)), got
    bits = b.all_gather_object(local.all_reduce(np.linspace(0, 1, 10_000) * (rank + 1), "sum").tobytes())
    assert len(set(bits)) == 1, "a float all-reduce gave different bits on different ranks"
    return {}


def check_timeout(_: Any) -> Dict[str, Any]:
    # Rank 0 runs in another namespace (another group) than the others, so no rank's header exchange can
    # match: every rank must raise CollectiveTimeoutError after SHORT_TIMEOUT seconds instead of hanging.
    b = Backend(timeout=SHORT_TIMEOUT, namespace="timeout-alone" if hvd.rank() == 0 else "timeout-rest")
    start = time.monotonic()
    exc = _expect_error(lambda: b.all_gather_object(np.zeros(100_000)), CollectiveTimeoutError)
    elapsed = time.monotonic() - start
    assert isinstance(exc, TimeoutError)
    assert Backend.name in str(exc) and "all_gather_object" in str(exc), str(exc)
    assert SHORT_TIMEOUT * 0.9 <= elapsed < SHORT_TIMEOUT + 10, elapsed
    # the core poisoned the group: the next call is refused at once, naming the timeout
    start = time.monotonic()
    refused = _expect_error(lambda: b.barrier(), GroupPoisonedError)
    assert time.monotonic() - start < 1.0 and "did not complete within" in str(refused), str(refused)
    return {"elapsed": elapsed, "message": str(exc)}


_fresh_groups = itertools.count()


def fresh(timeout: float) -> Any:
    """A backend over a new group: the global process set under a new namespace (every rank calls it at the
    same point, so the counter agrees). Horovod refuses a second process set with the ranks of the global one."""
    return Backend(timeout=timeout, namespace=f"fresh{next(_fresh_groups)}")


def check_conformance(b: Any) -> Dict[str, Any]:
    # mmeval's conformance suite, the terminal checks (poisoning, two threads, Ctrl-C) included: each of those
    # runs on its own fresh group; in the main thread, so that SIGINT reaches the interrupt check
    assert threading.current_thread() is threading.main_thread()
    return {"done": conformance.check_backend(b, faults=True, fresh=fresh)}


# --------------------------------------------------------------------------


def run(checks: Dict[str, Callable[[Any], Any]], path: str) -> None:
    results: Dict[str, Any] = {}
    for name, check in checks.items():
        start = time.monotonic()
        try:
            info = check(backend)
            results[name] = {"ok": True, "error": "", "info": info if isinstance(info, dict) else {}}
        except BaseException as exc:
            results[name] = {"ok": False, "error": "".join(traceback.format_exception(exc)), "info": {}}
        results[name]["seconds"] = round(time.monotonic() - start, 3)
        print(
            f"rank {RANK}: {name}: {'ok' if results[name]['ok'] else 'FAILED'} ({results[name]['seconds']}s)",
            flush=True,
        )
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(results, f, default=repr)
    os.replace(tmp, path)


CHECKS: Dict[str, Callable[[Any], Any]] = {
    "conformance": check_conformance,
    "runtime": check_runtime,
    "broadcast_none_elsewhere": check_broadcast_none_elsewhere,
    "mixed_sizes": check_mixed_sizes,
    "accuracy_framework_tensors": check_accuracy_framework_tensors,
    "unpicklable_on_one_rank": check_unpicklable,
    "compute_metric_raises": check_compute_metric_raises,
    "process_set": check_process_set,
    "two_backend_objects": check_name_collision_free,
    "extra_collective": check_extra_collective,
    "native_reduction": check_native_reduction,
}


def wait_for_peers(suffix: str, limit: float = 120.0) -> None:
    """A barrier through OUT_DIR for when the group is broken: a rank that exits shuts Horovod down, which
    would turn a slower peer's pending timeout into a 'Horovod has been shut down' failure."""
    deadline = time.monotonic() + limit
    paths = [os.path.join(OUT_DIR, f"rank{r}{suffix}") for r in range(WS)]
    while not all(os.path.exists(p) for p in paths) and time.monotonic() < deadline:
        time.sleep(0.05)


if __name__ == "__main__":
    run(CHECKS, os.path.join(OUT_DIR, f"rank{RANK}.json"))
    run({"timeout": check_timeout}, os.path.join(OUT_DIR, f"rank{RANK}.timeout.json"))
    wait_for_peers(".timeout.json")
    print(f"rank {RANK}: done", flush=True)
