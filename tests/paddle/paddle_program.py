"""The rank program of the paddle_dist tests, started by ``python -m paddle.distributed.launch``.

Usage: ``paddle_program.py SCENARIO OUT_DIR``. Every rank runs SCENARIO and
writes what it saw to ``OUT_DIR/rank<R>.json`` (a dict: check name -> result),
rewritten after each check so that a rank that dies leaves what it had. An
exception in a check is recorded as ``{"error": type, "message": ...}``; the
parent test decides what was expected.

Scenarios:

* ``main`` -- identity and auto-selection, the conformance suite (with its
  terminal checks, each over a new ``mmeval_paddle.new_group``), Accuracy over
  padded (``paddle.io.DistributedBatchSampler``, paddle tensor batches) and
  uneven shards against the single-process result, and ``group=`` with a sub-group of ranks 0 and ws-1;
* ``groups`` -- 10 groups made one after another by ``mmeval_paddle.new_group``
  (``groups-paddle``: by ``paddle.distributed.new_group``), the last rank 0.3 s
  late to each; an all-gather over each (paddle's own fails or hangs within a
  few groups at 3 ranks: its rendezvous reads the previous group's addresses);
* ``exit`` -- the last rank leaves (``os._exit``) after a barrier; the others
  all-gather with a 30 s timeout and must raise an mmeval error well before it;
* ``hang`` -- the last rank sleeps instead of calling; the others must raise
  ``CollectiveTimeoutError`` after their 3 s timeout and exit;
* ``gather_rounds`` -- ``gather_object`` of arrays of a different size on every
  rank, to the last rank, under ``MMEVAL_PADDLE_DIST_GATHER_ROUND_MIB`` set by
  the test (rounds of 1 KiB: many rounds, each peer's last block partial);
* ``rank0_memory`` -- the first per-sample ``compute()`` of the process over
  :data:`RANK0_ROWS` rows per rank: rank 0's peak extra memory and the result
  (:func:`mmeval.testing.rank0_memory.measure_rank0_memory`).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any, Callable, Dict

import numpy as np

SCENARIO, OUT_DIR = sys.argv[1], sys.argv[2]

import paddle.distributed as dist  # noqa: E402

dist.init_parallel_env()

from mmeval_paddle import PaddleDist, new_group  # noqa: E402

from mmeval import Accuracy  # noqa: E402
from mmeval.core.dist import get_dist_backend, resolve_backend_name  # noqa: E402
from mmeval.core.errors import MMEvalError  # noqa: E402
from mmeval.testing.conformance import check_backend  # noqa: E402

RANK, WS = dist.get_rank(), dist.get_world_size()
results: Dict[str, Any] = {}


def record(name: str, fn: Callable[[], Any]) -> Any:
    try:
        value = fn()
        results[name] = {"ok": value}
    except Exception as exc:  # recorded for the parent to judge
        results[name] = {
            "error": type(exc).__name__,
            "message": str(exc),
            "mmeval": isinstance(exc, MMEvalError),
            "trace": traceback.format_exc()[-2000:],
        }
        value = None
    with open(os.path.join(OUT_DIR, f"rank{RANK}.json.tmp"), "w") as f:
        json.dump(results, f)
    os.replace(os.path.join(OUT_DIR, f"rank{RANK}.json.tmp"), os.path.join(OUT_DIR, f"rank{RANK}.json"))
    return value


def fresh(timeout: float) -> PaddleDist:
    """A backend over a new group of every rank (the terminal conformance checks poison theirs)."""
    return PaddleDist(new_group(), timeout=timeout)


def identity() -> Any:
    auto = resolve_backend_name(None)
    b = get_dist_backend("paddle_dist")
    return {
        "auto": auto,
        "rank": b.rank,
        "world_size": b.world_size,
        "detect": PaddleDist.detect(),
        "is_initialized": b.is_initialized,
        "global_rank": RANK,
    }


def dataset(n: int = 1013) -> Any:
    rng = np.random.default_rng(7)
    return rng.random((n, 5)).astype(np.float32), rng.integers(0, 5, n)


def accuracy_padded() -> Any:
    """DistributedBatchSampler pads its last round by repeating the first samples; size= drops them."""
    import paddle
    from paddle.io import DistributedBatchSampler

    scores, labels = dataset()
    expected = Accuracy(topk=(1, 3))(scores, labels)

    class DS(paddle.io.Dataset):  # type: ignore[misc]
        def __len__(self) -> int:
            return len(labels)

        def __getitem__(self, i: int) -> Any:
            return i

    acc = Accuracy(topk=(1, 3), dist_backend=PaddleDist(timeout=60))
    sampler = DistributedBatchSampler(DS(), batch_size=16, shuffle=False, num_replicas=WS, rank=RANK)
    seen = 0
    for batch in sampler:  # the batches as a paddle DataLoader yields them: paddle tensors
        acc.add(paddle.to_tensor(scores[batch]), paddle.to_tensor(labels[batch]))
        seen += len(batch)
    got = acc.compute(size=len(labels))
    return {"got": got, "expected": expected, "seen": seen}


def accuracy_uneven() -> Any:
    scores, labels = dataset()
    expected = Accuracy(topk=(1, 3))(scores, labels)
    idx = list(range(len(labels)))[RANK::WS]
    acc = Accuracy(topk=(1, 3), dist_backend=PaddleDist(timeout=60), dist_collect_mode="unzip")
    for start in range(0, len(idx), 16):
        batch = idx[start : start + 16]
        acc.add(scores[batch], labels[batch])
    return {"got": acc.compute(size=len(labels)), "expected": expected}


def sub_group() -> Any:
    members = [0, WS - 1] if WS > 1 else [0]
    group = new_group(members)  # every rank takes part in creating it
    b = PaddleDist(group, timeout=60)
    if RANK not in members:
        try:
            _ = b.rank
        except RuntimeError as exc:
            return {"member": False, "refused": str(exc)}
        return {"member": False, "refused": None}
    last = b.world_size - 1
    big = np.arange(300_000, dtype=np.int64) * (b.rank + 1)  # above the inline size: payload transfers
    gathered = b.all_gather_object({"g": RANK, "big": big})
    to_last = b.gather_object({"g": RANK, "big": big}, dst=last)
    from_last = b.broadcast_object({"from": RANK, "big": big} if b.rank == last else None, src=last)
    scores, labels = dataset(301)
    expected = Accuracy(topk=(1,))(scores, labels)
    acc = Accuracy(topk=(1,), dist_backend=b)
    for i in list(range(len(labels)))[b.rank :: b.world_size]:
        acc.add(scores[i : i + 1], labels[i : i + 1])
    return {
        "member": True,
        "rank": b.rank,
        "world_size": b.world_size,
        "all_gather": [
            (g["g"], bool(np.array_equal(g["big"], np.arange(300_000) * (k + 1)))) for k, g in enumerate(gathered)
        ],
        "gather": None if to_last is None else [g["g"] for g in to_last],
        "broadcast": [from_last["from"], bool(np.array_equal(from_last["big"], np.arange(300_000) * (last + 1)))],
        "accuracy": [acc.compute(size=len(labels)), expected],
    }


def groups(make: Callable[[], Any], count: int = 10) -> Any:
    """``count`` groups one after another, the last rank late to each; an all-gather over each."""
    seen = []
    for i in range(count):
        if RANK == WS - 1:
            time.sleep(0.3)
        b = PaddleDist(make(), timeout=60)
        seen.append(b.all_gather_object((i, RANK)) == [(i, r) for r in range(WS)])
    return seen


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")  # a zombie has exited
    except FileNotFoundError:
        return True


def wait_for_peers_to_exit(limit: float) -> Any:
    """Seconds until every other rank's process has exited (they raised and left), or None after ``limit``."""
    start = time.monotonic()
    pids = []
    for r in range(WS - 1):
        with open(os.path.join(OUT_DIR, f"rank{r}.json")) as f:
            pids.append(json.load(f)["pid"]["ok"])
    while time.monotonic() - start < limit:
        if all(_gone(pid) for pid in pids):
            return {"peers_exited_after": time.monotonic() - start}
        time.sleep(0.1)
    return {"peers_exited_after": None}


def fault(kind: str) -> Any:
    b = PaddleDist(timeout=30 if kind == "exit" else 3)
    b.barrier()
    if RANK == WS - 1:
        if kind == "exit":
            os._exit(0)
        return wait_for_peers_to_exit(25.0)  # alive but absent: never calls the collective
    start = time.monotonic()
    try:
        b.all_gather_object(np.arange(100_000))  # a payload: header and payload transfers
    except Exception as exc:
        return {
            "error": type(exc).__name__,
            "mmeval": isinstance(exc, MMEvalError),
            "message": str(exc),
            "seconds": time.monotonic() - start,
        }
    return {"error": None, "seconds": time.monotonic() - start}


if SCENARIO == "main":
    record("identity", identity)
    record("conformance", lambda: check_backend(PaddleDist(timeout=60), faults=True, fresh=fresh))
    record("accuracy_padded", accuracy_padded)
    record("accuracy_uneven", accuracy_uneven)
    record("sub_group", sub_group)
    record("done", lambda: True)
    # the terminal checks left gloo calls blocked on daemon threads of their poisoned groups: paddle aborts
    # ("terminate called without an active exception") when the interpreter tears them down at exit
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
elif SCENARIO in ("groups", "groups-paddle"):
    record("groups", lambda: groups(new_group if SCENARIO == "groups" else lambda: dist.new_group(list(range(WS)))))
    sys.stdout.flush()
    os._exit(0)
elif SCENARIO == "gather_rounds":

    def uneven(rank: int) -> np.ndarray:
        return np.arange(rank * 3001 + 7, dtype=np.int16)

    def gather_rounds() -> Any:
        got = PaddleDist(timeout=60).gather_object({"rank": RANK, "data": uneven(RANK)}, dst=WS - 1)
        if got is None:
            return None
        return [[g["rank"], bool(np.array_equal(g["data"], uneven(r)))] for r, g in enumerate(got)]

    record("gather_rounds", gather_rounds)
elif SCENARIO == "rank0_memory":
    from mmeval.testing.rank0_memory import measure_rank0_memory

    RANK0_ROWS = 400_000  # 35 MB per rank: each gloo wait stays far below paddle's 30 s limit
    record("rank0_memory", lambda: measure_rank0_memory(PaddleDist(timeout=60), RANK0_ROWS))
elif SCENARIO in ("exit", "hang"):
    record("pid", os.getpid)
    record("fault", lambda: fault(SCENARIO))
    record("exiting_at", time.time)
else:
    raise SystemExit(f"unknown scenario {SCENARIO!r}")
