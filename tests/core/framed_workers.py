"""Per-rank programs for test_framed_backend.py (importable by spawned children)."""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from mmeval import Accuracy
from mmeval.core.errors import DistCommunicationError


def payload(rank: int, big: bool = False) -> dict:
    n = 3_000_000 if big else 10
    return {"rank": rank, "arr": np.arange(n, dtype=np.float32) + rank, "nested": [rank, ("x", {"y": rank})]}


def collectives(backend, big):
    rank, ws = backend.rank, backend.world_size
    out = {"rank": rank, "ws": ws}
    gathered = backend.all_gather_object(payload(rank, big))
    out["all_gather"] = [(g["rank"], float(g["arr"].sum()), g["nested"]) for g in gathered]
    got = backend.gather_object(payload(rank, big), dst=ws - 1)
    out["gather"] = None if got is None else [(g["rank"], float(g["arr"][-1])) for g in got]
    src = 1 if ws > 1 else 0
    b = backend.broadcast_object(payload(rank, big) if rank == src else None, src=src)
    out["broadcast"] = (b["rank"], float(b["arr"][-1]))
    backend.barrier()
    out["empty"] = backend.all_gather_object(b"")
    out["none"] = backend.broadcast_object(None, src=0)
    return out


def unpicklable_on_one(backend):
    obj = threading.Lock() if backend.rank == 1 else {"ok": backend.rank}
    try:
        backend.all_gather_object(obj)
    except DistCommunicationError as exc:
        return type(exc).__name__, str(exc)
    return "no error", ""


def mismatch(backend):
    try:
        if backend.rank == 0:
            backend.broadcast_object({"x": 1}, src=0)
        else:
            backend.all_gather_object({"x": 2})
    except DistCommunicationError as exc:
        return type(exc).__name__, str(exc)
    return "no error", ""


def extra_call(backend):
    try:
        if backend.rank == 0:
            backend.barrier()
        backend.all_gather_object(backend.rank)
    except DistCommunicationError as exc:
        return type(exc).__name__, str(exc)
    return "no error", ""


def dies_mid_collective(backend):
    if backend.rank == 1:
        os._exit(3)
    start = time.monotonic()
    try:
        backend.gather_object(np.zeros(100_000), dst=0)
    except DistCommunicationError as exc:
        return type(exc).__name__, str(exc), time.monotonic() - start
    return "no error", "", 0.0


def never_arrives(backend):
    if backend.rank == 1:
        time.sleep(8)
        return "slept", "", 0.0
    start = time.monotonic()
    try:
        backend.broadcast_object({"x": 1}, src=0)
    except DistCommunicationError as exc:
        return type(exc).__name__, str(exc), time.monotonic() - start
    return "no error", "", 0.0


def evaluate(backend, scores, labels, mode, shard):
    """Evaluate Accuracy on this rank's shard; return the metric dict."""
    rank, ws = backend.rank, backend.world_size
    n = len(labels)
    if shard == "padded":  # DistributedSampler: pad to a multiple of ws, deal round-robin
        total = -(-n // ws) * ws
        idx = (list(range(n)) + list(range(total - n)))[rank::ws]
    elif shard == "uneven":
        idx = list(range(n))[rank::ws]
    else:  # contiguous blocks for 'cat'
        per = -(-n // ws)
        idx = list(range(n))[rank * per : (rank + 1) * per]
    acc = Accuracy(topk=(1, 3), dist_backend=backend, dist_collect_mode=mode)
    for start in range(0, len(idx), 7):
        batch = idx[start : start + 7]
        acc.add(scores[batch], labels[batch])
    return acc.compute(size=n)


class Boom(Accuracy):
    def compute_metric(self, results):
        raise KeyError("boom on the computing rank")


def compute_metric_raises(backend):
    m = Boom(topk=(1,), dist_backend=backend)
    m.add(np.eye(3)[[backend.rank % 3]], np.array([0]))
    try:
        m.compute()
    except KeyError as exc:
        return "KeyError", str(exc)
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return "no error", ""


def with_stats(backend):
    from mmeval.core.hooks import enable_comm_stats

    stats = enable_comm_stats(print_at_exit=False)
    backend.all_gather_object(np.zeros(10_000, dtype=np.uint8))
    backend.gather_object(b"x", dst=0)
    return stats.rows(), stats.report()


def safe_codec_roundtrip(backend):
    got = backend.all_gather_object({"rank": backend.rank, "arr": np.arange(3.0)})
    try:
        backend.all_gather_object(Accuracy())  # not plain data
    except DistCommunicationError as exc:
        return [g["rank"] for g in got], type(exc).__name__, str(exc)
    return [g["rank"] for g in got], "no error", ""


def codec_by_rank(backend):
    try:
        backend.all_gather_object({"x": 1})
    except DistCommunicationError as exc:
        return type(exc).__name__, str(exc)
    return "no error", ""


def _explode():
    raise ValueError("cannot rebuild this result here")


class FailsOnLoad:
    def __reduce__(self):
        return _explode, ()


class ObjectMetric(Accuracy):
    def add(self, item):  # object results, MMEval style
        self._results.append(item)

    def compute_metric(self, results):
        return {"n": len(results)}


def undecodable_result_on_rank_1(backend):
    m = ObjectMetric(dist_backend=backend)
    m.add(FailsOnLoad() if backend.rank == 1 else ("fine", backend.rank))
    start = time.monotonic()
    try:
        m.compute()
    except Exception as exc:
        return type(exc).__name__, str(exc), time.monotonic() - start
    return "no error", "", 0.0


def socket_no_delay(backend) -> list:
    """Each of this rank's hub connections' TCP_NODELAY (nonzero: set)."""
    import socket

    from hub_backend import tcp_socket

    out = []
    for conn in backend._conns.values():
        with tcp_socket(conn) as s:
            out.append(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
    return out
