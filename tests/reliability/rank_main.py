"""One rank of the reliability campaign: joins a group, runs named scenarios, writes what happened to a file.

Launched by the tests of this directory, never imported by them::

    python rank_main.py --backend torch_cpu --rank R --world-size N --addr A --port P [--ifname IF] \\
        --out DIR --scenarios a,b,c [--timeout T] [--param KEY=JSON ...]
    mpiexec -n N python rank_main.py --backend mpi4py --out DIR --scenarios a,b,c ...
    horovodrun --gloo -np N ... python rank_main.py --backend torch_horovod --out DIR --scenarios a,b,c ...

Every rank appends JSON lines to ``DIR/rank<R>.jsonl`` (not stdout: a rank in a
network namespace whose link is cut can no longer reach its launcher): events
(``{"event": "ready", ...}``, ``{"event": "victim", ...}``) as they happen,
and one ``{"event": "result", "scenario": ..., "ok": ..., "info": ...}`` per
scenario. Times are ``time.monotonic()`` (CLOCK_MONOTONIC: one clock for every
process of the machine, network namespaces included), so the parent can
measure how long after its SIGKILL or link cut a rank raised; a rank in a time
namespace (its monotonic clock set back) reports them on the machine's clock.

The scenarios check their own expectations and record failures in
``info["failures"]``; the parent asserts on them and on the timings.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import threading
import time
import traceback
import zlib
from typing import Any, Callable, Dict, List, Optional

import numpy as np

# --------------------------------------------------------------------------
# reporting
# --------------------------------------------------------------------------

_out_path = ""
_out_lock = threading.Lock()


def _timens_offset() -> float:
    """Seconds this process's CLOCK_MONOTONIC is shifted by its time namespace (0 outside one)."""
    try:
        with open("/proc/self/timens_offsets", encoding="ascii") as f:
            for line in f:
                name, secs, nsecs = line.split()
                if name in ("monotonic", "1"):
                    return int(secs) + int(nsecs) / 1e9
    except (OSError, ValueError):
        pass
    return 0.0


_MONOTONIC_OFFSET = _timens_offset()


def now() -> float:
    """The machine's ``time.monotonic()`` (this process's, less its time namespace's offset)."""
    return time.monotonic() - _MONOTONIC_OFFSET


def emit(event: str, **fields: Any) -> None:
    """Append one JSON line to this rank's file (flushed: the process may be SIGKILLed next)."""
    line = json.dumps({"event": event, "t": now(), "pid": os.getpid(), **fields}, default=repr)
    with _out_lock, open(_out_path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()


def vm_kib(field: str = "VmRSS") -> int:
    """A ``/proc/self/status`` field (``VmRSS``, ``VmHWM``) in KiB."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def describe(exc: BaseException, started: float) -> Dict[str, Any]:
    """Plain data about an exception raised by a collective that started at ``started``."""
    return {
        "type": type(exc).__name__,
        "mro": [c.__name__ for c in type(exc).__mro__],
        "message": str(exc),
        "raised_at": now(),
        "seconds": time.monotonic() - started,
    }


class Ctx:
    """What a scenario gets: the backend, this rank, the world, the parameters, a list of failures."""

    def __init__(self, backend: Any, kind: str, params: Dict[str, Any]) -> None:
        self.backend = backend
        self.kind = kind
        self.rank: int = backend.rank
        self.ws: int = backend.world_size
        self.params = params
        self.failures: List[str] = []

    def check(self, what: str, cond: bool, detail: Any = "") -> bool:
        if not cond:
            self.failures.append(f"{what}: {detail}" if detail != "" else what)
        return bool(cond)

    def expect_error(self, what: str, call: Callable[[], Any], kinds: tuple, *contains: str) -> Dict[str, Any]:
        """``call()`` must raise one of the exception class names ``kinds`` with every string of ``contains``."""
        start = time.monotonic()
        try:
            value = call()
        except Exception as exc:
            info = describe(exc, start)
            self.check(f"{what}: error type", info["type"] in kinds, f"{info['type']}: {info['message']}")
            missing = [c for c in contains if c not in info["message"]]
            self.check(f"{what}: message", not missing, f"lacks {missing}: {info['message']}")
            return info
        self.check(what, False, f"no error, returned {value!r}"[:500])
        return {"type": None, "message": "", "seconds": time.monotonic() - start}


SCENARIOS: Dict[str, Callable[[Ctx], Dict[str, Any]]] = {}


def scenario(fn: Callable[[Ctx], Dict[str, Any]]) -> Callable[[Ctx], Dict[str, Any]]:
    SCENARIOS[fn.__name__] = fn
    return fn


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------

N_SAMPLES, NUM_CLASSES, BATCH = 1003, 10, 41


def dataset(seed: int = 6) -> tuple:
    """A deterministic classification problem: (scores (N, C) float32, labels (N,) int64)."""
    rng = np.random.default_rng(seed)
    scores = rng.random((N_SAMPLES, NUM_CLASSES)).astype(np.float32)
    labels = rng.integers(0, NUM_CLASSES, N_SAMPLES)
    hit = rng.random(N_SAMPLES) < 0.4
    scores[hit, labels[hit]] += 1.0
    return scores, labels


def padded_shard(rank: int, ws: int) -> np.ndarray:
    """``DistributedSampler(shuffle=False)``: indices padded to a multiple of ``ws`` by wrapping, dealt ``rank::ws``."""
    total = -(-N_SAMPLES // ws) * ws
    idx = list(range(N_SAMPLES)) + list(range(total - N_SAMPLES))
    return np.asarray(idx[rank::ws])


def single_process_accuracy() -> Dict[str, float]:
    from mmeval import Accuracy

    scores, labels = dataset()
    return Accuracy(topk=(1, 3), dist_backend="non_dist")(scores, labels)


def single_process_average_precision() -> Dict[str, float]:
    from mmeval import AveragePrecision

    scores, labels = dataset()
    return AveragePrecision(dist_backend="non_dist")(scores, [[int(c)] for c in labels])


# --------------------------------------------------------------------------
# scenarios
# --------------------------------------------------------------------------


@scenario
def evaluate(ctx: Ctx) -> Dict[str, Any]:
    """Accuracy over padded DistributedSampler shards must equal one process over the whole dataset."""
    from mmeval import Accuracy

    scores, labels = dataset()
    idx = padded_shard(ctx.rank, ctx.ws)
    acc = Accuracy(topk=(1, 3), dist_backend=ctx.backend)
    for s in range(0, len(idx), BATCH):
        acc.add(scores[idx[s : s + BATCH]], labels[idx[s : s + BATCH]])
    got = acc.compute(size=N_SAMPLES)
    want = single_process_accuracy()
    ctx.check("distributed == single process", got == want, f"got {got}, want {want}")
    return {"got": got, "want": want}


@scenario
def evaluate_ap(ctx: Ctx) -> Dict[str, Any]:
    """AveragePrecision (a per-sample metric: every score gathered) over padded shards == one process, bit for bit."""
    from mmeval import AveragePrecision

    scores, labels = dataset()
    idx = padded_shard(ctx.rank, ctx.ws)
    ap = AveragePrecision(dist_backend=ctx.backend)
    for s in range(0, len(idx), BATCH):
        ap.add(scores[idx[s : s + BATCH]], [[int(c)] for c in labels[idx[s : s + BATCH]]])
    got = ap.compute(size=N_SAMPLES)
    want = single_process_average_precision()
    ctx.check("distributed == single process", got == want, f"got {got}, want {want}")
    return {"got": got, "want": want}


@scenario
def loop_until_error(ctx: Ctx) -> Dict[str, Any]:
    """All-gather 256 KiB per rank in a loop until a collective fails (the parent cuts the link meanwhile)."""
    b = ctx.backend
    limit = float(ctx.params.get("loop_seconds", 120))
    payload = np.full(256 << 10, ctx.rank, dtype=np.uint8)
    looping_after = int(ctx.params.get("looping_after", 50))
    end = time.monotonic() + limit
    i = 0
    while time.monotonic() < end:
        i += 1
        started = time.monotonic()
        try:
            got = b.all_gather_object(payload)
        except Exception as exc:
            info = describe(exc, started)
            emit("raised", info=info)
            return {"iterations": i, "error": info}
        ctx.check("payloads intact", all(int(g[0]) == r and int(g[-1]) == r for r, g in enumerate(got)))
        if i == looping_after:
            emit("looping")
    ctx.check("the loop ended by an error", False, f"{i} collectives in {limit:g}s and no error")
    return {"iterations": i, "error": None}


def _link_bytes(ifname: str) -> int:
    """Bytes sent plus received on interface ``ifname`` of this rank's network namespace (headers included)."""
    base = f"/sys/class/net/{ifname}/statistics/"
    total = 0
    for name in ("tx_bytes", "rx_bytes"):
        with open(base + name, encoding="ascii") as f:
            total += int(f.read())
    return total


@scenario
def wire_bytes(ctx: Ctx) -> Dict[str, Any]:
    """One AveragePrecision compute() (per-sample scores gathered): the link's bytes and comm-stats' counts.

    The counts are taken between two barriers, the link's counters around
    compute() and the second barrier (whose bytes the link carries but the
    counts exclude, as they exclude the TCP/IP headers and gloo's framing).
    """
    from mmeval import AveragePrecision
    from mmeval.core.comm_stats import enable_comm_stats

    ifname = str(ctx.params["ifname"])
    n = int(ctx.params.get("wire_samples", 60_000))
    rng = np.random.default_rng(11)
    scores = rng.random((n, NUM_CLASSES)).astype(np.float32)
    labels = rng.integers(0, NUM_CLASSES, n)
    idx = np.arange(ctx.rank, n, ctx.ws)
    metric = AveragePrecision(dist_backend=ctx.backend)
    metric.add(scores[idx], labels[idx])
    stats = enable_comm_stats(print_at_exit=False)
    ctx.backend.barrier()
    stats.reset()
    before = _link_bytes(ifname)
    got = metric.compute(size=n)
    rows = stats.rows()
    ctx.backend.barrier()
    after = _link_bytes(ifname)
    want = AveragePrecision(dist_backend="non_dist")(scores, labels)
    ctx.check("distributed == single process", got == want, f"got {got}, want {want}")
    return {
        "link_bytes": after - before,
        "sent": sum(r["bytes_sent"] for r in rows),
        "received": sum(r["bytes_received"] for r in rows),
        "calls": sum(r["calls"] for r in rows),
        "rows": rows,
    }


def _call(ctx: Ctx, op: str, obj: Any, root: int) -> Any:
    b = ctx.backend
    if op == "all_gather_object":
        return b.all_gather_object(obj)
    if op == "gather_object":
        return b.gather_object(obj, dst=root)
    if op == "broadcast_object":
        return b.broadcast_object(obj if ctx.rank == root else None, src=root)
    if op == "barrier":
        return b.barrier()
    raise ValueError(op)


@scenario
def killed_rank(ctx: Ctx) -> Dict[str, Any]:
    """The victim stops inside ``op`` (in the header exchange or the payload transfer) until SIGKILLed.

    Parameters: ``op``, ``phase`` (``headers`` | ``payload``), ``victim``, ``root``.
    Survivors call ``op`` and must raise a DistCommunicationError naming it; a
    survivor whose part was already done (a gather sender whose payload was
    delivered) returns, and then its next collective (a barrier) must raise.
    """
    op, phase = ctx.params["op"], ctx.params["phase"]
    victim, root = int(ctx.params["victim"]), int(ctx.params.get("root", 0))
    b = ctx.backend
    b.barrier()  # everyone is here: the survivors enter the operation together
    obj = {"rank": ctx.rank, "data": np.full(1 << 20, ctx.rank, dtype=np.uint8)}  # 1 MiB: not inline
    if ctx.rank == victim:
        primitive = {
            "headers": "_exchange_slots",
            "all_gather_object": "_all_gather_bytes",
            "gather_object": "_gather_bytes",
            "broadcast_object": "_broadcast_bytes",
        }
        name = primitive["headers"] if phase == "headers" else primitive[op]

        def stop_here(*args: Any, **kwargs: Any) -> Any:
            emit("victim", op=op, phase=phase, primitive=name)
            time.sleep(600)  # the parent SIGKILLs this process now
            raise AssertionError("the victim was not killed")

        setattr(b, name, stop_here)
        _call(ctx, op, obj, root)
        ctx.check("the victim was killed", False)
        return {}
    emit("entering", op=op)
    started = time.monotonic()
    out: Dict[str, Any] = {"raised_in": None}
    try:
        _call(ctx, op, obj, root)
    except Exception as exc:
        out.update(raised_in=op, error=describe(exc, started))
    else:
        follow = time.monotonic()
        try:
            b.barrier()
        except Exception as exc:
            out.update(raised_in="barrier", error=describe(exc, follow), op_returned_at=follow)
    err = out.get("error")
    if ctx.check("raised", err is not None):
        ctx.check("a DistCommunicationError", "DistCommunicationError" in err["mro"], err)
        ctx.check("names the operation", out["raised_in"] in err["message"], err["message"])
        ctx.check("names the backend", ctx.kind in err["message"], err["message"])
    emit("raised", info=out)
    return out


@scenario
def desync(ctx: Ctx) -> Dict[str, Any]:
    """Desynchronized programs: a clear error on every rank, and the group usable after each mismatch.

    1. different collectives (rank 0 a barrier, the others an all-gather);
    2. a gather with a different ``dst`` on rank 0;
    3. a broadcast with a different ``src`` on the last rank;
    4. rank 0 calls one collective more (a broadcast) before a common all-gather;
    5. rank 0 calls one collective more at the end, alone: it times out naming the operation
       (the others are past it; they report that they made no call).
    """
    b, r, ws = ctx.backend, ctx.rank, ctx.ws
    mismatch = ("CollectiveMismatchError",)
    infos: Dict[str, Any] = {}

    def resync(step: str) -> None:
        got = b.all_gather_object({"rank": r, "step": step})
        ctx.check(f"{step}: usable afterwards", got == [{"rank": i, "step": step} for i in range(ws)], got)

    big = np.ones(1 << 20, np.uint8)
    call = (lambda: b.barrier()) if r == 0 else (lambda: b.all_gather_object(big))
    infos["different_collectives"] = ctx.expect_error(
        "different collectives", call, mismatch, ctx.kind, "barrier", "all_gather_object"
    )
    resync("different_collectives")
    dst = 0 if r == 0 else 1
    infos["different_dst"] = ctx.expect_error(
        "different dst", lambda: b.gather_object(big, dst=dst), mismatch, "gather_object", "dst=0", "dst=1"
    )
    resync("different_dst")
    src = ws - 1 if r == ws - 1 else 0
    infos["different_src"] = ctx.expect_error(
        "different src",
        lambda: b.broadcast_object(big, src=src),
        mismatch,
        "broadcast_object",
        "src=0",
        f"src={ws - 1}",
    )
    resync("different_src")

    def extra_then_common() -> Any:
        if r == 0:
            b.broadcast_object({"extra": True}, src=0)
        return b.all_gather_object(r)

    infos["one_more_first"] = ctx.expect_error(
        "one more collective first", extra_then_common, mismatch, "broadcast_object", "all_gather_object"
    )
    resync("one_more_first")
    timeout = b.timeout
    if r == 0:
        info = ctx.expect_error(
            "one more collective at the end",
            lambda: b.all_gather_object({"late": r}),
            ("CollectiveTimeoutError", "CollectiveFailedError"),
            "all_gather_object",
            ctx.kind,
        )
        ctx.check("within the timeout", info["seconds"] < timeout + 10, info["seconds"])
        infos["one_more_last"] = info
    else:
        infos["one_more_last"] = {"made no call": True}
        time.sleep(timeout + 2)  # stay alive: rank 0 must time out rather than see us exit
    return infos


def _soak_plan(seed: int, i: int, ws: int, max_bytes: int) -> tuple:
    """Collective ``i`` of the soak: (op, root, sizes per rank, data offsets per rank); the same on every rank."""
    rng = random.Random(seed * 1_000_003 + i)
    op = rng.choices(["all_gather_object", "gather_object", "broadcast_object", "barrier"], [45, 25, 25, 5])[0]
    root = rng.randrange(ws)
    sizes, offsets = [], []
    for _ in range(ws):
        if i < 12:  # warm-up: the largest payloads of every operation first, then zero bytes
            size = max_bytes if i < 9 else 0
        elif rng.random() < 0.04:
            size = 0
        else:  # log-uniform over 1 B .. max_bytes: mostly small, some up to 8 MB
            size = min(max_bytes, int(math.exp(rng.uniform(0.0, math.log(max_bytes + 1)))))
        sizes.append(size)
        offsets.append(rng.randrange(max_bytes + 1))
    if i < 9:
        op = ["all_gather_object", "gather_object", "broadcast_object"][i % 3]
    return op, root, sizes, offsets


@scenario
def soak(ctx: Ctx) -> Dict[str, Any]:
    """``count`` consecutive collectives of random sizes (0 B .. ``max_bytes``), each payload checksummed.

    The payload of rank ``r`` at collective ``i`` is ``{"seq": i, "rank": r,
    "crc": crc32(data), "data": data}``, ``data`` a slice of a random block
    every rank builds from the same seed: receivers check the order (``seq``,
    ``rank``), the length, the checksum, and the bytes themselves.
    """
    b, r, ws = ctx.backend, ctx.rank, ctx.ws
    count, seed = int(ctx.params.get("count", 10_000)), int(ctx.params.get("seed", 6))
    max_bytes = int(ctx.params.get("max_bytes", 8_000_000))
    warmup = int(ctx.params.get("warmup", 300))
    block = np.random.default_rng(seed).integers(0, 256, 2 * max_bytes + 1, dtype=np.uint8)
    view = memoryview(block)
    checked = moved = 0
    by_op: Dict[str, int] = {}
    rss_start = rss_end = 0
    samples: List[List[int]] = []  # [collective, VmRSS KiB] every 500 collectives after the warm-up
    started = time.monotonic()
    bad: List[str] = []

    def payload(i: int, rank: int, sizes: List[int], offsets: List[int]) -> Dict[str, Any]:
        data = block[offsets[rank] : offsets[rank] + sizes[rank]]
        return {"seq": i, "rank": rank, "crc": zlib.crc32(data), "data": data}

    def verify(i: int, rank: int, got: Any, sizes: List[int], offsets: List[int]) -> None:
        nonlocal checked
        checked += 1
        data = got["data"]
        want = view[offsets[rank] : offsets[rank] + sizes[rank]]
        if (got["seq"], got["rank"], len(data)) != (i, rank, sizes[rank]):
            bad.append(f"#{i} from rank {rank}: seq/rank/size {(got['seq'], got['rank'], len(data))}")
        elif not zlib.crc32(data) == got["crc"] == zlib.crc32(want):
            bad.append(f"#{i} from rank {rank}: checksum differs (data corrupted, or not what rank {rank} sent)")

    for i in range(count):
        if i == warmup:
            rss_start = vm_kib()
            emit("soak_warm", rss_kib=rss_start)
        op, root, sizes, offsets = _soak_plan(seed, i, ws, max_bytes)
        by_op[op] = by_op.get(op, 0) + 1
        if op == "barrier":
            b.barrier()
            continue
        mine = payload(i, r, sizes, offsets)
        if op == "all_gather_object":
            got = b.all_gather_object(mine)
            for rank, g in enumerate(got):
                verify(i, rank, g, sizes, offsets)
            moved += sum(sizes)
        elif op == "gather_object":
            got = b.gather_object(mine, dst=root)
            if r == root:
                for rank, g in enumerate(got):
                    verify(i, rank, g, sizes, offsets)
            else:
                ctx.check(f"#{i}: gather returns None off the root", got is None)
            moved += sum(sizes)
        else:
            got = b.broadcast_object(mine if r == root else None, src=root)
            verify(i, root, got, sizes, offsets)
            moved += sizes[root]
        del got, mine
        if len(bad) > 20:
            break
        if i > warmup and i % 500 == 0:
            samples.append([i, vm_kib()])
            emit("soak_progress", done=i, rss_kib=samples[-1][1])
    rss_end = vm_kib()
    ctx.check("every payload intact and in order", not bad, bad[:20])
    return {
        "collectives": count,
        "payloads_checked": checked,
        "bytes_moved": moved,
        "by_op": by_op,
        "rss_start_kib": rss_start,
        "rss_end_kib": rss_end,
        "rss_peak_kib": vm_kib("VmHWM"),
        "seconds": time.monotonic() - started,
        "warmup": warmup,
        "rss_samples": samples,
    }


@scenario
def bad_input(ctx: Ctx) -> Dict[str, Any]:
    """Bad ``add()`` calls on some ranks: ValueError naming the argument, state unchanged, the refusal remembered.

    Rank ``ws - 1`` makes every bad call below between its good batches; rank 0
    makes one; the others none. The next ``compute()`` raises on every rank
    naming the refused ranks; after ``reset()`` and the good batches again,
    ``compute(size=N)`` everywhere equals one process over the whole dataset.
    Then a bad ``compute(size=-1)`` on the last rank alone reaches every rank.
    """
    from mmeval import Accuracy

    scores, labels = dataset()
    r, ws = ctx.rank, ctx.ws
    idx = padded_shard(r, ws)
    acc = Accuracy(topk=(1, 3), dist_backend=ctx.backend)
    bad_calls = [
        ("wrong shape", np.zeros((4, NUM_CLASSES, 2)), np.zeros(4, int), "predictions"),
        ("labels wrong shape", np.zeros((4, NUM_CLASSES)), np.zeros((4, 1), int), "labels"),
        ("mismatched lengths", np.zeros((4, NUM_CLASSES)), np.zeros(5, int), "predictions and labels"),
        ("NaN scores", np.full((3, NUM_CLASSES), np.nan), np.zeros(3, int), "NaN"),
        ("empty batch", np.zeros((0, NUM_CLASSES)), np.zeros(0, int), "predictions is empty"),
        ("label too large", np.zeros((2, NUM_CLASSES)), np.array([0, NUM_CLASSES]), "labels out of range"),
        ("negative label", np.zeros((2, NUM_CLASSES)), np.array([0, -1]), "labels out of range"),
        ("non-integral labels", np.zeros((2, NUM_CLASSES)), np.array([0.5, 1.0]), "labels"),
        ("topk > classes", np.zeros((2, 2)), np.array([0, 1]), "topk"),
    ]
    if r == 0:
        bad_calls = bad_calls[3:4]
    elif r != ws - 1:
        bad_calls = []
    raised: List[str] = []
    batches = [idx[s : s + BATCH] for s in range(0, len(idx), BATCH)]
    for n, batch in enumerate(batches):
        acc.add(scores[batch], labels[batch])
        if n < len(bad_calls):
            what, preds, labs, word = bad_calls[n]
            before_n = acc.num_results
            before = {k: v.copy() for k, v in acc._local_results().items()}
            try:
                acc.add(preds, labs)
            except ValueError as exc:
                raised.append(what)
                ctx.check(f"{what}: names the argument", word in str(exc), str(exc))
            except Exception as exc:
                ctx.check(f"{what}: a ValueError", False, f"{type(exc).__name__}: {exc}")
            else:
                ctx.check(f"{what}: refused", False, "accepted")
            after = acc._local_results()
            ctx.check(
                f"{what}: state unchanged",
                acc.num_results == before_n and all(np.array_equal(before[k], after[k]) for k in before),
                acc.num_results,
            )
    ctx.check("every bad call raised", len(raised) == len(bad_calls), raised)
    # a refused add() is remembered until reset(): the next compute() raises on every rank, naming the ranks that
    # were refused (0 and ws - 1) -- never an answer without their refused batches -- and nobody waits for it
    start = time.monotonic()
    if r in (0, ws - 1):
        ctx.expect_error(
            "compute() after a refused add()",
            lambda: acc.compute(size=N_SAMPLES),
            ("ValueError",),
            f"rank {r}: Accuracy.add() was refused",
        )
    else:
        ctx.expect_error(
            "compute() after a peer's refused add()",
            lambda: acc.compute(size=N_SAMPLES),
            ("CollectiveMismatchError",),
            "rank 0",
            f"rank {ws - 1}",
        )
    ctx.check("the refused add() reached every rank at once", time.monotonic() - start < 10, time.monotonic() - start)
    # reset() forgets the refusals: the good batches alone give one process's answer
    acc.reset()
    for batch in batches:
        acc.add(scores[batch], labels[batch])
    got = acc.compute(size=N_SAMPLES)
    want = single_process_accuracy()
    ctx.check("compute() after bad calls == single process", got == want, f"got {got}, want {want}")
    again = acc.compute(size=N_SAMPLES)
    ctx.check("a second compute() agrees", again == want, again)
    # a bad argument on one rank reaches every rank at once: that rank raises its ValueError, the others a
    # CollectiveMismatchError naming it (nobody waits for the timeout)
    start = time.monotonic()
    if r == ws - 1:
        ctx.expect_error("bad size on one rank", lambda: acc.compute(size=-1), ("ValueError",), "size")
    else:
        ctx.expect_error(
            "a peer's bad size", lambda: acc.compute(size=N_SAMPLES), ("CollectiveMismatchError",), f"rank {ws - 1}"
        )
    ctx.check("the refusal reached every rank at once", time.monotonic() - start < 10, time.monotonic() - start)
    return {"bad_calls": raised, "got": got}


class _Plainless:
    """Not plain data: the safe codec must refuse it."""

    def __reduce__(self) -> Any:
        return (_Plainless, ())


def _marker_pickle_frame(marker: str) -> Any:
    """A pickle-codec frame that creates ``marker`` when unpickled (what a hostile peer could send)."""
    from mmeval.core import serialization as ser

    class Payload:
        def __reduce__(self) -> Any:
            return (os.mkdir, (marker,))

    return ser.encode(Payload(), "pickle")


@scenario
def safe_codec(ctx: Ctx) -> Dict[str, Any]:
    """The backend's codec (``codec=`` / MMEVAL_CODEC / MMEVAL_<BACKEND>_CODEC) is ``safe``: plain data only.

    1. plain data (nested containers, numpy arrays and scalars) round-trips;
    2. the last rank sends a non-plain object: RemoteSerializationError on every rank, naming that rank;
    3. the last rank forges a pickle frame (one that would create a marker directory when
       unpickled) under a header that claims the safe codec: every rank that decodes it refuses it
       (UnsafePayloadError) and the marker is never created;
    4. the same frame relabelled as a safe frame: FrameDecodeError, no marker.
    """
    from mmeval.core import serialization as ser

    b, r, ws = ctx.backend, ctx.rank, ctx.ws
    ctx.check("the codec is safe", b.codec == "safe", b.codec)
    obj = {"rank": r, "arr": np.arange(5, dtype=np.int16) * r, "f": np.float32(0.5), "t": (1, "x", b"y", None)}
    got = b.all_gather_object(obj)
    ctx.check(
        "plain data round-trips",
        all(
            g["rank"] == i and g["arr"].tolist() == [j * i for j in range(5)] and g["t"] == (1, "x", b"y", None)
            for i, g in enumerate(got)
        ),
        got,
    )
    bad = ws - 1
    info: Dict[str, Any] = {}
    info["non_plain"] = ctx.expect_error(
        "a non-plain object",
        lambda: b.all_gather_object(_Plainless() if r == bad else {"ok": r}),
        ("RemoteSerializationError",),
        f"rank {bad}",
        "safe",
    )
    b.barrier()
    marker = os.path.join(ctx.params["scratch"], f"pwned-by-rank{bad}")
    real_codec = b.wire_codec

    class _Forger:
        """This rank's codec, as a hostile peer would make it: claims 'safe', sends a pickle frame."""

        name, id, plain_data_only = real_codec.name, real_codec.id, True

        def __init__(self, frame: Any) -> None:
            self.frame = frame

        def encode(self, obj: Any) -> Any:
            return self.frame

        def decode(self, data: Any) -> Any:
            return real_codec.decode(data)

    for label, relabel in (("forged_pickle", False), ("relabelled", True)):
        if r == bad:
            frame = _marker_pickle_frame(marker)
            if relabel:  # claim the safe codec in the frame itself too
                raw = bytearray(frame.tobytes())
                raw[4] = ser.CODECS["safe"]
                frame = ser.Frame([(0, memoryview(bytes(raw)))], len(raw))
            b._wire_codec = _Forger(frame)
        try:
            kinds = ("FrameDecodeError",) if relabel else ("UnsafePayloadError",)
            info[label] = ctx.expect_error(label, lambda: b.all_gather_object({"rank": r}), kinds)
        finally:
            b._wire_codec = real_codec
        ctx.check(f"{label}: nothing ran", not os.path.exists(marker), marker)
        b.barrier()
    info.update(_safe_codec_metrics(ctx, marker))
    return info


def _safe_codec_metrics(ctx: Ctx, marker: str) -> Dict[str, Any]:
    """Metrics over a safe-codec backend: compute() works, and rank 0 cannot make the others unpickle.

    5. ``Accuracy.compute()`` (array results, gathered to rank 0) equals one process;
    6. ``compute_metric`` raises on rank 0, whose error report carries a pickled exception
       crafted to create the marker when unpickled: the others raise RemoteMetricError
       (type and message only) and the marker is never created.
    """
    from mmeval import Accuracy
    from mmeval.core.sync import gather

    info: Dict[str, Any] = {}
    scores, labels = dataset()
    idx = padded_shard(ctx.rank, ctx.ws)
    acc = Accuracy(topk=(1, 3), dist_backend=ctx.backend)
    acc.add(scores[idx], labels[idx])
    try:
        got = acc.compute(size=N_SAMPLES)
    except Exception as exc:
        ctx.check("Accuracy.compute() with the safe codec", False, f"{type(exc).__name__}: {exc}")
    else:
        want = single_process_accuracy()
        ctx.check("Accuracy.compute() with the safe codec == single process", got == want, f"{got} != {want}")
        info["accuracy"] = got

    class Failing(Accuracy):
        def add(self, *batch: Any) -> None:  # type: ignore[override]
            self._results.append(batch)  # object results: the per-sample path, whose rank 0 reports errors

        def compute_metric(self, results: Any) -> Dict[str, float]:
            raise KeyError("compute_metric failed on rank 0")

    class Payload:
        def __reduce__(self) -> Any:
            return (os.mkdir, (marker,))

    real_pack = gather.pack_exception
    if ctx.rank == 0:  # a hostile computing rank: its error report would run code where it is unpickled
        import pickle

        def hostile_pack(exc: BaseException) -> Dict[str, Any]:
            return {"type": "builtins.KeyError", "message": str(exc), "pickled": pickle.dumps(Payload())}

        gather.pack_exception = hostile_pack  # type: ignore[assignment]
    try:
        failing = Failing(topk=(1,), dist_backend=ctx.backend)
        failing.add(scores[idx[:5]], labels[idx[:5]])
        kinds = ("KeyError",) if ctx.rank == 0 else ("RemoteMetricError",)
        info["hostile_error_report"] = ctx.expect_error(
            "compute_metric error report", failing.compute, kinds, "compute_metric failed on rank 0"
        )
    finally:
        gather.pack_exception = real_pack
    ctx.check("the error report ran nothing", not os.path.exists(marker), marker)
    return info


# --------------------------------------------------------------------------
# process setup
# --------------------------------------------------------------------------


def make_backend(args: argparse.Namespace) -> Any:
    codec = args.codec or None
    if args.backend == "torch_cpu":
        if args.ifname:
            os.environ["GLOO_SOCKET_IFNAME"] = args.ifname
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        from datetime import timedelta

        import torch.distributed as dist

        from mmeval_torch import TorchCPUDist

        if args.rank < 0:  # under torchrun: RANK, WORLD_SIZE, MASTER_ADDR / MASTER_PORT from its environment
            dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
        else:
            dist.init_process_group(
                "gloo",
                init_method=f"tcp://{args.addr}:{args.port}",
                rank=args.rank,
                world_size=args.world_size,
                timeout=timedelta(seconds=args.pg_timeout),
            )
        return TorchCPUDist(timeout=args.timeout, codec=codec)
    if args.backend == "mpi4py":
        from mmeval_mpi4py import MPI4PyDist

        return MPI4PyDist(timeout=args.timeout, codec=codec)
    if args.backend == "torch_horovod":  # under horovodrun: HOROVOD_RANK, HOROVOD_SIZE, the gloo rendezvous
        import horovod.torch as hvd

        from mmeval_horovod import TorchHorovodDist

        hvd.init()
        return TorchHorovodDist(timeout=args.timeout, codec=codec)
    raise SystemExit(f"unknown backend {args.backend!r}")


def main(argv: Optional[List[str]] = None) -> None:
    global _out_path
    p = argparse.ArgumentParser()
    p.add_argument("--backend", required=True)
    p.add_argument("--rank", type=int, default=-1)
    p.add_argument("--world-size", type=int, default=-1)
    p.add_argument("--addr", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--ifname", default="")
    p.add_argument("--out", required=True)
    p.add_argument("--scenarios", required=True)
    p.add_argument("--timeout", type=float, default=None)
    p.add_argument("--pg-timeout", type=float, default=300.0)
    p.add_argument("--codec", default="")
    p.add_argument("--param", action="append", default=[])
    p.add_argument("--grace", type=float, default=0.0, help="seconds to stay alive after the last scenario")
    args = p.parse_args(argv)
    params = {}
    for item in args.param:
        key, _, value = item.partition("=")
        params[key] = json.loads(value)
    rank = args.rank
    if rank < 0:  # under a launcher: its rank, read without initializing MPI or Horovod
        for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "HOROVOD_RANK", "RANK"):
            if var in os.environ:
                rank = int(os.environ[var])
                break
        else:
            rank = 0
    _out_path = os.path.join(args.out, f"rank{rank}.jsonl")
    try:
        backend = make_backend(args)
        ctx = Ctx(backend, args.backend, params)
        emit("ready", rank=ctx.rank, world_size=ctx.ws, codec=backend.codec, timeout=backend.timeout)
    except BaseException:
        emit("result", scenario="setup", ok=False, info={"failures": [traceback.format_exc()]})
        raise
    for name in args.scenarios.split(","):
        ctx.failures = []
        try:
            info = SCENARIOS[name](ctx)
        except BaseException:
            ctx.failures.append(traceback.format_exc())
            info = {}
        info["failures"] = ctx.failures
        emit("result", scenario=name, ok=not ctx.failures, info=info)
    emit("done")
    sys.stdout.flush()
    if args.grace:  # under MPI: let every rank report before one's MPI_Abort at exit ends the job
        time.sleep(args.grace)


if __name__ == "__main__":
    main()
