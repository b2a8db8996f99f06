"""Real multi-process groups for the torch backend tests.

Parent side: :class:`Ranks` spawns ``world_size`` processes (start method
``spawn``) that form one torch.distributed group (gloo on 127.0.0.1, or NCCL
for ``torch_cuda``) and then run named *checks* on command, all ranks at once,
each answering over its own pipe. A group lives across many tests (spawning
and importing torch is the expensive part); every wait in the parent has a
deadline, and a group that misses one is killed, so nothing can hang.

Worker side: the functions registered with :func:`check` run on every rank
with a :class:`Ctx`; what they return (plain data) or raise (described by
:func:`describe`) goes back to the parent as an :class:`Outcome`.

This module does not import torch at the top: the parent need not, and the
workers set their environment (threads, socket interface) before torch loads.
"""

from __future__ import annotations

import os
import pickle
import threading
import time
import traceback
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from mmeval.testing.ranks import free_port

#: Seconds a collective may take in checks that expect no fault (only a bug hits it).
CHECK_TIMEOUT = 60.0
#: Environment every worker gets before torch is imported.
WORKER_ENV = {
    "OMP_NUM_THREADS": "1",
    "GLOO_SOCKET_IFNAME": "lo",
    "MASTER_ADDR": "127.0.0.1",
    "TORCH_CPP_LOG_LEVEL": "ERROR",
    "MMEVAL_DIST_BACKEND": "",
}


# --------------------------------------------------------------------------
# parent side
# --------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one rank reported for one check."""

    rank: int
    status: str  # 'ok' | 'raised' | 'died' | 'no answer'
    value: Any = None
    error: Dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0

    def __str__(self) -> str:
        if self.status == "ok":
            return f"rank {self.rank}: ok {self.value!r}"[:2000]
        if self.status == "raised":
            return f"rank {self.rank}: raised {self.error.get('qualname')}: {self.error.get('message')}\n" + str(
                self.error.get("traceback", "")
            )
        return f"rank {self.rank}: {self.status} {self.error or ''}"


class GroupFailure(AssertionError):
    """The group of ranks failed as a whole (did not start, or missed a deadline)."""


class Ranks:
    """``world_size`` spawned processes in one torch.distributed group, running checks on command.

    Args:
        world_size: number of processes.
        kind: ``'torch_cpu'`` (gloo) or ``'torch_cuda'`` (NCCL, one GPU per rank).
        start_timeout: seconds for every rank to start and join the group.
        env: extra environment for the workers.
    """

    def __init__(
        self,
        world_size: int,
        kind: str = "torch_cpu",
        start_timeout: float = 180.0,
        env: Optional[Dict[str, str]] = None,
    ) -> None:
        import multiprocessing as mp

        self.world_size = world_size
        self.kind = kind
        self.broken = False
        ctx = mp.get_context("spawn")
        worker_env = dict(WORKER_ENV)
        worker_env.update(env or {})
        # free_port() is free a moment ago only: another process (the suite runs envs side by side) may take
        # the port before rank 0's store listens on it. That, and nothing else, is tried again on a new port.
        for attempt in range(3):
            self._conns, self._procs = [], []
            port = free_port()
            for rank in range(world_size):
                parent, child = ctx.Pipe()
                proc = ctx.Process(
                    target=worker_main,
                    args=(rank, world_size, port, kind, child, worker_env),
                    name=f"mmeval-{kind}-rank{rank}",
                    daemon=True,
                )
                proc.start()
                child.close()
                self._conns.append(parent)
                self._procs.append(proc)
            ready = self._collect(start_timeout, stop=_port_taken)
            if all(o.status == "ok" for o in ready) and len(ready) == world_size:
                return
            self.close(graceful=False)
            if not any(_port_taken(o) for o in ready) or attempt == 2:
                raise GroupFailure(f"{kind} group of {world_size} did not start:\n" + "\n".join(map(str, ready)))

    def __enter__(self) -> "Ranks":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close(graceful=not self.broken)

    def run(
        self, name: str, *args: Any, timeout: float = 120.0, per_rank: Optional[Sequence[Tuple[Any, ...]]] = None
    ) -> List[Outcome]:
        """Run check ``name`` on every rank (``per_rank[r]`` as rank r's args if given); wait ``timeout`` s.

        A rank that does not answer in time, or dies, marks the group broken
        (its outcome says so); the caller decides what that means.
        """
        if self.broken:
            raise GroupFailure("this group is broken by an earlier fault; start a new one")
        for rank, conn in enumerate(self._conns):
            conn.send((name, tuple(per_rank[rank]) if per_rank is not None else args))
        outcomes = self._collect(timeout)
        if any(o.status in ("died", "no answer") for o in outcomes):
            self.broken = True
        return outcomes

    def _collect(self, timeout: float, stop: Optional[Callable[[Outcome], bool]] = None) -> List[Outcome]:
        """Every rank's outcome within ``timeout`` s; ``stop``: give up waiting for the others at such an outcome."""
        deadline = time.monotonic() + timeout
        outcomes: List[Optional[Outcome]] = [None] * self.world_size
        pending = set(range(self.world_size))
        while pending:
            if stop is not None and any(o is not None and stop(o) for o in outcomes):
                break
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for rank in sorted(pending):
                conn, proc = self._conns[rank], self._procs[rank]
                if conn.poll(0.02):
                    try:
                        outcomes[rank] = conn.recv()
                    except (EOFError, OSError):
                        proc.join(5)
                        outcomes[rank] = Outcome(rank, "died", error={"exitcode": proc.exitcode})
                    pending.discard(rank)
                elif not proc.is_alive():
                    outcomes[rank] = Outcome(rank, "died", error={"exitcode": proc.exitcode})
                    pending.discard(rank)
        for rank in pending:
            outcomes[rank] = Outcome(rank, "no answer", error={"waited_s": timeout})
        return [o for o in outcomes if o is not None]

    def close(self, graceful: bool = True) -> None:
        """Stop the workers: ask them to leave (graceful), then terminate / kill what is left."""
        if graceful:
            for conn in self._conns:
                try:
                    conn.send(None)
                except (OSError, ValueError):
                    pass
            deadline = time.monotonic() + 20
            for proc in self._procs:
                proc.join(max(0.0, deadline - time.monotonic()))
        for proc in self._procs:
            if proc.is_alive():
                proc.terminate()
        for proc in self._procs:
            proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        for conn in self._conns:
            conn.close()


def _port_taken(outcome: Outcome) -> bool:
    """Whether a rank failed to start because its rendezvous port was taken meanwhile (EADDRINUSE)."""
    return outcome.status != "ok" and "EADDRINUSE" in str(outcome)


def values(outcomes: Sequence[Outcome]) -> List[Any]:
    """The value of every rank; fails with every rank's report unless all of them succeeded."""
    if all(o.status == "ok" for o in outcomes):
        return [o.value for o in outcomes]
    raise AssertionError("not every rank succeeded:\n" + "\n".join(str(o) for o in outcomes))


# --------------------------------------------------------------------------
# worker side
# --------------------------------------------------------------------------


@dataclass
class Ctx:
    """What a check gets: this rank, the world, the backend kind, and per-process state."""

    rank: int
    world_size: int
    kind: str
    state: Dict[str, Any]

    def backend(self, group: Any = None, timeout: float = CHECK_TIMEOUT, cls: Any = None) -> Any:
        """A new backend object of this group's kind."""
        from mmeval_torch import TorchCPUDist, TorchCUDADist

        if cls is None:
            cls = TorchCUDADist if self.kind == "torch_cuda" else TorchCPUDist
        return cls(group, timeout=timeout)


CHECKS: Dict[str, Callable[..., Any]] = {}


def check(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Register ``fn(ctx, *args)`` as a check the parent can run by name."""
    CHECKS[fn.__name__] = fn
    return fn


def describe(exc: BaseException, elapsed: float = 0.0) -> Dict[str, Any]:
    """Plain-data description of an exception (it crosses a pipe; the class may not unpickle)."""
    cls = type(exc)
    return {
        "type": cls.__name__,
        "qualname": f"{cls.__module__}.{cls.__qualname__}",
        "mro": [c.__name__ for c in cls.__mro__],
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(cls, exc, exc.__traceback__)),
        "elapsed": elapsed,
    }


def expect_raises(call: Callable[[], Any]) -> Dict[str, Any]:
    """Run ``call``; return :func:`describe` of what it raised (AssertionError if it returned)."""
    start = time.monotonic()
    try:
        value = call()
    except Exception as exc:
        return describe(exc, time.monotonic() - start)
    raise AssertionError(f"expected an exception, got {value!r}")


def worker_main(rank: int, world_size: int, port: int, kind: str, conn: Any, env: Dict[str, str]) -> None:
    """Process entry: join the group, then run checks until told to stop (``None``)."""
    for key, value in env.items():
        if value:
            os.environ[key] = value
        else:
            os.environ.pop(key, None)
    try:
        import torch
        import torch.distributed as dist

        from mmeval import Accuracy
        from mmeval.core.dist import resolve_backend_name

        state: Dict[str, Any] = {}
        # built before init_process_group, naming no backend: compute() must pick torch_* later
        state["pre_init_metric"] = Accuracy(topk=(1, 3))
        state["pre_init_resolved"] = resolve_backend_name(None)
        # TEST_TORCH_CUDA_DEVICE: every rank on that one device (gloo ranks sharing a GPU); TEST_TORCH_PG_BACKEND:
        # the process group's backend string (e.g. "cpu:gloo,cuda:nccl") instead of the kind's
        shared_device = os.environ.get("TEST_TORCH_CUDA_DEVICE")
        if shared_device is not None:
            torch.cuda.set_device(int(shared_device))
        elif kind == "torch_cuda":
            torch.cuda.set_device(rank)
        dist.init_process_group(
            os.environ.get("TEST_TORCH_PG_BACKEND") or ("nccl" if kind == "torch_cuda" else "gloo"),
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=120),
        )
        ctx = Ctx(rank, world_size, kind, state)
        conn.send(Outcome(rank, "ok", {"pid": os.getpid()}))
    except BaseException as exc:
        conn.send(Outcome(rank, "raised", error=describe(exc)))
        return
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            os._exit(0)  # the parent is gone
        if msg is None:
            break
        name, args = msg
        start = time.monotonic()
        try:
            value = CHECKS[name](ctx, *args)
            outcome = Outcome(rank, "ok", value, elapsed=time.monotonic() - start)
        except BaseException as exc:
            outcome = Outcome(
                rank, "raised", error=describe(exc, time.monotonic() - start), elapsed=time.monotonic() - start
            )
        try:
            conn.send(outcome)
        except Exception as exc:  # an unpicklable value: report that instead
            conn.send(Outcome(rank, "raised", error=describe(exc)))
    dist.destroy_process_group()
    conn.close()


# -- data ------------------------------------------------------------------


def make_obj(rank: int, big: int = 0) -> Dict[str, Any]:
    """A nested object with numpy arrays and tensors that differs per rank (``big`` extra bytes)."""
    import torch

    rng = np.random.default_rng(rank)
    return {
        "rank": rank,
        "name": f"rank-{rank}-" * (rank + 1),
        "arrays": [
            np.arange(rank * 7, dtype=np.int64),
            rng.standard_normal((rank + 1, 3)).astype(np.float32),
            np.empty((0, 3)),
            np.arange(2048, dtype=np.float64).reshape(64, 32) * rank,
        ],
        "tensors": {
            "f32": torch.arange(rank * 5, dtype=torch.float32).reshape(-1, 5),
            "bf16": torch.linspace(0, 1, 600).to(torch.bfloat16) * rank,
            "i64_large": torch.arange(4096, dtype=torch.int64) + rank,
            "grad": torch.full((3,), float(rank), requires_grad=True),
            "noncontig": (torch.arange(64.0).reshape(8, 8) + rank)[:, ::2],
            "scalar": torch.tensor(rank),
            "bool": torch.arange(10) % (rank + 2) == 0,
        },
        "nested": (None, [rank, {"deep": np.float64(rank) / 3}], frozenset({rank, -1})),
        "big": np.full(big, rank % 251, dtype=np.uint8) if big else None,
    }


def assert_same(got: Any, want: Any, path: str = "obj") -> None:
    """Deep equality that also checks types, dtypes, shapes, devices and requires_grad."""
    import torch

    assert type(got) is type(want), f"{path}: type {type(got).__name__} != {type(want).__name__}"
    if isinstance(want, dict):
        assert list(got) == list(want), f"{path}: keys {list(got)} != {list(want)}"
        for k in want:
            assert_same(got[k], want[k], f"{path}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want), f"{path}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{path}[{i}]")
    elif isinstance(want, np.ndarray):
        have, need = (got.dtype, tuple(got.shape)), (want.dtype, tuple(want.shape))
        assert have == need, f"{path}: dtype, shape {have} != {need}"
        assert np.array_equal(got, want), f"{path}: values differ"
    elif isinstance(want, torch.Tensor):
        have, need = (got.dtype, tuple(got.shape)), (want.dtype, tuple(want.shape))
        assert have == need, f"{path}: dtype, shape {have} != {need}"
        assert got.requires_grad == want.requires_grad, f"{path}: requires_grad {got.requires_grad}"
        assert got.device.type == want.device.type, f"{path}: device {got.device} != {want.device}"
        assert torch.equal(got.detach().cpu(), want.detach().cpu()), f"{path}: values differ"
    else:
        assert got == want, f"{path}: {got!r} != {want!r}"


def make_dataset(n: int, classes: int = 10, seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Scores (n, classes) float32 and labels (n,) int64; about half the samples are top-1 hits."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, size=n).astype(np.int64)
    scores = rng.random((n, classes)).astype(np.float32)
    hits = rng.random(n) < 0.5
    scores[hits, labels[hits]] += 1.0
    return scores, labels


def reference_accuracy(n: int, seed: int = 0) -> Dict[str, float]:
    """The single-process result every distributed evaluation must match exactly."""
    from mmeval import Accuracy

    scores, labels = make_dataset(n, seed=seed)
    metric = Accuracy(topk=(1, 3), dist_backend="non_dist")
    metric.add(scores, labels)
    return metric.compute()


# -- checks: basics ----------------------------------------------------------


@check
def info(ctx: Ctx) -> Dict[str, Any]:
    """Rank, world size, detection and auto-selection as this rank sees them."""
    from mmeval.core.dist import resolve_backend_name
    from mmeval_torch import TorchCPUDist, TorchCUDADist

    b = ctx.backend()
    b2 = ctx.backend()
    return {
        "rank": b.rank,
        "world_size": b.world_size,
        "is_initialized": b.is_initialized,
        "detect": {"torch_cpu": TorchCPUDist.detect(), "torch_cuda": TorchCUDADist.detect()},
        "auto": resolve_backend_name("auto"),
        "pre_init_resolved": ctx.state["pre_init_resolved"],
        "shared_sequence": b._sequence_key() is b2._sequence_key(),
        "repr": repr(b),
    }


@check
def conformance(ctx: Ctx) -> List[str]:
    """mmeval's conformance suite (the checks every backend of the repository is held to)."""
    import torch.distributed as dist

    from mmeval.testing.conformance import check_backend

    def fresh(timeout: float) -> Any:
        # a new group for each check that leaves its group poisoned (every rank calls this at the same point)
        return ctx.backend(
            group=dist.new_group(backend="nccl" if ctx.kind == "torch_cuda" else "gloo"), timeout=timeout
        )

    return check_backend(ctx.backend(), fresh=fresh)


def _generic_paths_backend(ctx: Ctx) -> Any:
    """A backend that takes the paths meant for transports other than gloo/NCCL (MPI, UCC, ...).

    It reports an unknown transport, so the all-gather uses a separate send
    buffer (no in-place) and the gather uses one padded ``dist.gather``.
    """
    from mmeval_torch import TorchCPUDist, TorchCUDADist

    base = TorchCUDADist if ctx.kind == "torch_cuda" else TorchCPUDist

    class GenericPaths(base):  # type: ignore[valid-type,misc]
        def _transport_name(self, device: Any) -> str:
            return "some-other-backend"

    return GenericPaths(timeout=CHECK_TIMEOUT)


@check
def collectives(ctx: Ctx, big: int = 0, generic_paths: bool = False) -> Dict[str, Any]:
    """all_gather / broadcast from every src / gather to every dst / barrier, checked on every rank."""
    b = _generic_paths_backend(ctx) if generic_paths else ctx.backend()
    rank, ws = ctx.rank, ctx.world_size
    mine = make_obj(rank, big)
    expected = [make_obj(r, big) for r in range(ws)]
    got = b.all_gather_object(mine)
    assert_same(got, expected, "all_gather_object")
    for src in range(ws):
        value = b.broadcast_object(mine if rank == src else None, src=src)
        if rank == src:
            assert value is mine, "broadcast_object: src must get its own object back"
        else:
            assert_same(value, expected[src], f"broadcast_object(src={src})")
    for dst in range(ws):
        gathered = b.gather_object(mine, dst=dst)
        if rank == dst:
            assert_same(gathered, expected, f"gather_object(dst={dst})")
        else:
            assert gathered is None, f"gather_object(dst={dst}) returned {type(gathered)} off dst"
    b.barrier()
    return {"ranks_seen": [o["rank"] for o in got]}


@check
def empty_payloads(ctx: Ctx) -> int:
    """Empty and trivial objects through every collective."""
    import torch

    b = ctx.backend()
    ws = ctx.world_size
    cases = [
        None,
        b"",
        [],
        {},
        "",
        np.empty(0),
        np.empty((0, 3), dtype=np.float32),
        torch.empty(0),
        torch.empty((2, 0), dtype=torch.bfloat16),
    ]
    for case in cases:
        assert_same(b.all_gather_object(case), [case] * ws, f"all_gather_object({case!r})")
        assert_same(b.broadcast_object(case if ctx.rank == ws - 1 else None, src=ws - 1), case, "broadcast")
        gathered = b.gather_object(case, dst=0)
        if ctx.rank == 0:
            assert_same(gathered, [case] * ws, "gather_object")
        else:
            assert gathered is None
    return len(cases)


@check
def uneven_payloads(ctx: Ctx, generic_paths: bool = False) -> List[int]:
    """Ranks send very different sizes (inline and out-of-line mixed, not multiples of 64)."""
    b = _generic_paths_backend(ctx) if generic_paths else ctx.backend()
    rank, ws = ctx.rank, ctx.world_size

    def payload(r: int) -> bytes:
        n = 0 if r == 1 else (r + 1) * 1_000_003 if r % 2 == 0 else 777
        return bytes([r % 256]) * n

    got = b.all_gather_object(payload(rank))
    assert [len(g) for g in got] == [len(payload(r)) for r in range(ws)]
    assert got == [payload(r) for r in range(ws)]
    gathered = b.gather_object(payload(rank), dst=ws - 1)
    if rank == ws - 1:
        assert gathered == [payload(r) for r in range(ws)]
    assert b.broadcast_object(payload(rank) if rank == 0 else None, src=0) == payload(0)
    return [len(g) for g in got]


# -- checks: errors shared by every rank --------------------------------------


@check
def unpicklable(ctx: Ctx, bad_rank: int) -> Dict[str, Any]:
    """One rank holds a lock (and one a lambda): every rank must raise RemoteSerializationError."""
    b = ctx.backend()
    rank = ctx.rank
    good = {"rank": rank}
    bad: Any = {"lock": threading.Lock()} if rank == bad_rank else good
    out = {
        "all_gather": expect_raises(lambda: b.all_gather_object(bad)),
        "gather": expect_raises(lambda: b.gather_object(bad, dst=0)),
        "broadcast": expect_raises(
            lambda: b.broadcast_object((lambda x: x) if rank == bad_rank else None, src=bad_rank)
        ),
    }
    # the group is still usable afterwards
    assert b.all_gather_object(good) == [{"rank": r} for r in range(ctx.world_size)]
    return out


@check
def mismatch(ctx: Ctx) -> Dict[str, Any]:
    """Ranks calling different collectives (or different roots) raise CollectiveMismatchError everywhere."""
    b = ctx.backend()
    rank, ws = ctx.rank, ctx.world_size
    if rank == 0:
        first = expect_raises(lambda: b.broadcast_object("x", src=0))
    else:
        first = expect_raises(lambda: b.all_gather_object("x"))
    second = expect_raises(lambda: b.gather_object("y", dst=rank % 2))
    if rank == ws - 1:
        third = expect_raises(lambda: b.barrier())
    else:
        third = expect_raises(lambda: b.all_gather_object(np.arange(10_000)))
    assert b.all_gather_object(rank) == list(range(ws)), "the group must still work after a mismatch"
    return {"op_vs_op": first, "dst_vs_dst": second, "barrier_vs_all_gather": third}


@check
def metric_error(ctx: Ctx) -> Dict[str, Any]:
    """compute_metric raising on the computing rank makes every rank raise the same type and message."""
    from mmeval import Accuracy

    class FailingAccuracy(Accuracy):
        def compute_metric(self, results: Any) -> Dict[str, Any]:
            raise ValueError(f"deliberate failure in compute_metric over {len(results)} results")

    scores, labels = make_dataset(20)
    metric = FailingAccuracy(topk=(1, 3), dist_backend=ctx.backend())
    metric.add(scores[ctx.rank :: ctx.world_size], labels[ctx.rank :: ctx.world_size])
    raised = expect_raises(lambda: metric.compute(size=20))
    ok = Accuracy(topk=(1, 3), dist_backend=ctx.backend())
    ok.add(scores[ctx.rank :: ctx.world_size], labels[ctx.rank :: ctx.world_size])
    assert ok.compute(size=20) == reference_accuracy(20), "the group must still work after a remote error"
    return raised


# -- checks: subgroups ----------------------------------------------------------


@check
def subgroups(ctx: Ctx) -> Dict[str, Any]:
    """Backends over dist.new_group(even ranks) and (odd ranks): ranks, collectives, an evaluation."""
    import torch.distributed as dist

    from mmeval import Accuracy

    rank, ws = ctx.rank, ctx.world_size
    evens, odds = list(range(0, ws, 2)), list(range(1, ws, 2))
    groups = {"even": dist.new_group(evens)}
    if odds:
        groups["odd"] = dist.new_group(odds)
    mine, members = ("even", evens) if rank in evens else ("odd", odds)
    b = ctx.backend(group=groups[mine])
    grank, gws = members.index(rank), len(members)
    assert (b.rank, b.world_size) == (grank, gws), f"group rank/size {(b.rank, b.world_size)} != {(grank, gws)}"
    expected = [make_obj(m) for m in members]
    assert_same(b.all_gather_object(make_obj(rank)), expected, "subgroup all_gather_object")
    last = gws - 1
    value = b.broadcast_object(make_obj(rank) if grank == last else None, src=last)
    assert_same(value, expected[last], "subgroup broadcast_object")
    gathered = b.gather_object(make_obj(rank), dst=last)
    if grank == last:
        assert_same(gathered, expected, "subgroup gather_object")
    else:
        assert gathered is None
    # two backend objects over one group share the collective sequence
    b2 = ctx.backend(group=groups[mine])
    assert b2._sequence_key() is b._sequence_key()
    assert b2.all_gather_object(grank) == list(range(gws))
    b.barrier()
    non_member = None
    other = "odd" if mine == "even" else "even"
    if other in groups:
        non_member = expect_raises(lambda: ctx.backend(group=groups[other]).rank)
    # an evaluation on the subgroup: its members shard the whole dataset among themselves
    n = 53
    scores, labels = make_dataset(n, seed=5)
    metric = Accuracy(topk=(1, 3), dist_backend=b)
    metric.add(scores[grank::gws], labels[grank::gws])
    result = metric.compute(size=n)
    assert result == reference_accuracy(n, seed=5), f"subgroup evaluation {result} != {reference_accuracy(n, seed=5)}"
    # a group with no backend for this backend's device is refused with a clear error
    other_device = "cuda:gloo" if ctx.kind == "torch_cpu" else "cpu:gloo"
    wrong_device_group = dist.new_group(list(range(ws)), backend=other_device)
    wrong_device = expect_raises(lambda: ctx.backend(group=wrong_device_group)._device())
    return {
        "group": mine,
        "group_rank": grank,
        "group_size": gws,
        "result": result,
        "non_member": non_member,
        "wrong_device": wrong_device,
    }


# -- checks: evaluation -----------------------------------------------------------


@check
def eval_distributed_sampler(ctx: Ctx, n: int, shuffle: bool) -> Dict[str, float]:
    """DistributedSampler (pads to a multiple of the world size) + DataLoader + compute(size=n)."""
    import torch
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    from mmeval import Accuracy

    scores, labels = make_dataset(n, seed=1)
    dataset = TensorDataset(torch.from_numpy(scores), torch.from_numpy(labels))
    sampler = DistributedSampler(dataset, num_replicas=ctx.world_size, rank=ctx.rank, shuffle=shuffle, seed=3)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler)
    metric = Accuracy(topk=(1, 3), dist_backend=ctx.kind)
    device = torch.device("cuda", torch.cuda.current_device()) if ctx.kind == "torch_cuda" else None
    for batch_scores, batch_labels in loader:
        if device is not None:
            batch_scores, batch_labels = batch_scores.to(device), batch_labels.to(device)
        metric.add(predictions=batch_scores, labels=batch_labels)
    assert metric.num_results == len(sampler)
    result = metric.compute(size=n)
    want = reference_accuracy(n, seed=1)
    assert result == want, f"{result} != single-process {want}"
    return result


@check
def eval_uneven_shards(ctx: Ctx, n: int) -> Dict[str, Any]:
    """Shards of different lengths, no padding: indices[rank::ws] ('unzip') and contiguous splits ('cat')."""
    from mmeval import Accuracy

    scores, labels = make_dataset(n, seed=2)
    want = reference_accuracy(n, seed=2)
    interleaved = Accuracy(topk=(1, 3), dist_backend=ctx.kind)
    idx = np.arange(n)[ctx.rank :: ctx.world_size]
    for start in range(0, len(idx), 5):
        part = idx[start : start + 5]
        interleaved.add(scores[part], labels[part])
    results = {"unzip": interleaved.compute(), "unzip_size": interleaved.compute(size=n)}
    contiguous = Accuracy(topk=(1, 3), dist_backend=ctx.kind, dist_collect_mode="cat")
    shard = np.array_split(np.arange(n), ctx.world_size)[ctx.rank]
    if len(shard):
        contiguous.add(scores[shard], labels[shard])
    results["cat"] = contiguous.compute(size=n)
    for key, value in results.items():
        assert value == want, f"{key}: {value} != single-process {want}"
    return {"shard": len(idx), **results}


@check
def eval_auto_selected(ctx: Ctx, n: int) -> Dict[str, Any]:
    """The metric built before init_process_group, naming no backend, uses the torch backend now."""
    metric = ctx.state["pre_init_metric"]
    assert metric.dist_backend is None
    scores, labels = make_dataset(n, seed=4)
    metric.add(scores[ctx.rank :: ctx.world_size], labels[ctx.rank :: ctx.world_size])
    chosen = metric.dist_comm.name
    result = metric.compute(size=n)
    metric.reset()
    want = reference_accuracy(n, seed=4)
    assert result == want, f"{result} != single-process {want}"
    return {"pre_init": ctx.state["pre_init_resolved"], "chosen": chosen, "result": result}


@check
def huge_broadcast(ctx: Ctx, nbytes: int) -> Dict[str, Any]:
    """broadcast_object and gather_object of one array of ``nbytes`` (> 2 GiB) bytes."""
    b = ctx.backend(timeout=600)
    if ctx.rank == 0:
        arr = np.empty(nbytes, dtype=np.uint8)
        arr[:: 1 << 20] = np.arange(len(arr[:: 1 << 20])) % 251
        arr[-1] = 7
    else:
        arr = None
    got = b.broadcast_object({"a": arr} if ctx.rank == 0 else None, src=0)["a"]
    assert got.nbytes == nbytes and got[-1] == 7
    assert np.array_equal(got[:: 1 << 20], np.arange(len(got[:: 1 << 20])) % 251)
    del got, arr
    return {"received": nbytes}


# -- checks: faults ----------------------------------------------------------------


def _dying_backend(ctx: Ctx, dying_rank: int, timeout: float) -> Any:
    """A backend whose rank ``dying_rank`` exits inside the payload transfer (after the headers)."""
    from mmeval_torch import TorchCPUDist, TorchCUDADist

    base = TorchCUDADist if ctx.kind == "torch_cuda" else TorchCPUDist

    class Dying(base):  # type: ignore[valid-type,misc]
        name = base.name

        def _all_gather_bytes(self, call: Any) -> Any:
            if self.rank == dying_rank:
                os._exit(0)
            return super()._all_gather_bytes(call)

        def _gather_bytes(self, call: Any) -> Any:
            if self.rank == dying_rank:
                os._exit(0)
            return super()._gather_bytes(call)

    return Dying(timeout=timeout)


@check
def die_before(ctx: Ctx, dying_rank: int, timeout: float) -> Dict[str, Any]:
    """``dying_rank`` exits instead of calling all_gather_object; the others must raise."""
    if ctx.rank == dying_rank:
        os._exit(0)
    b = ctx.backend(timeout=timeout)
    return expect_raises(lambda: b.all_gather_object(make_obj(ctx.rank, big=1 << 20)))


@check
def die_mid(ctx: Ctx, dying_rank: int, op: str, timeout: float) -> Dict[str, Any]:
    """``dying_rank`` exits after the header exchange, in the middle of the collective.

    ``op='compute'`` runs ``AveragePrecision.compute()`` (a per-sample metric:
    a gather to rank 0, then a broadcast of the result): the dying rank exits
    inside the gather. (A state metric such as Accuracy moves one inline slot:
    no payload stage to die in.)
    """
    from mmeval import AveragePrecision

    b = _dying_backend(ctx, dying_rank, timeout)
    if op == "compute":
        scores, labels = make_dataset(400_000, classes=4)  # 6.4 MB of scores per rank: not inline
        metric = AveragePrecision(dist_backend=b)
        metric.add(scores, np.eye(4, dtype=np.int64)[labels])
        return expect_raises(lambda: metric.compute())
    return expect_raises(lambda: b.all_gather_object(make_obj(ctx.rank, big=4 << 20)))


@check
def stay_away(ctx: Ctx, idle_rank: int, op: str, timeout: float) -> Dict[str, Any]:
    """``idle_rank`` never calls the collective (hangs elsewhere); the others must time out."""
    if ctx.rank == idle_rank:
        return {"idle": True}
    b = ctx.backend(timeout=timeout)
    if op == "broadcast_object":
        return expect_raises(lambda: b.broadcast_object(make_obj(0) if ctx.rank == 0 else None, src=0))
    return expect_raises(lambda: b.all_gather_object(make_obj(ctx.rank)))


# -- the seed tutorial, as written there (spawn + gloo + dist_backend='torch_cpu') ---


def tutorial_eval_fn(rank: int, process_num: int, port: int, out_dir: str, n: int) -> None:
    """The tutorial's ``eval_fn``, with a synthetic dataset and a small linear model instead of CIFAR-10."""
    for key, value in WORKER_ENV.items():
        if value:
            os.environ[key] = value
    import torch
    from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

    from mmeval import Accuracy

    torch.distributed.init_process_group(
        backend="gloo", init_method=f"tcp://127.0.0.1:{port}", world_size=process_num, rank=rank
    )
    torch.manual_seed(0)
    images = torch.randn(n, 3, 4, 4)
    labels = torch.randint(0, 10, (n,))
    dataset = TensorDataset(images, labels)
    eval_dataloader = DataLoader(
        dataset, batch_size=1, sampler=DistributedSampler(dataset, num_replicas=process_num, rank=rank)
    )
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 10)).eval()

    accuracy = Accuracy(topk=(1, 3), dist_backend="torch_cpu")
    with torch.no_grad():
        for image, label in eval_dataloader:
            predicted_score = model(image)
            accuracy.add(predictions=predicted_score, labels=label)
    result = accuracy.compute(size=n)
    accuracy.reset()

    single = Accuracy(topk=(1, 3), dist_backend="non_dist")
    with torch.no_grad():
        single.add(predictions=model(images), labels=labels)
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump({"result": result, "single": single.compute()}, f)
    torch.distributed.destroy_process_group()


# -- tensors in add() and CUDA tensors in objects (tests/torch/test_torch_cuda.py) ------------------


@check
def metric_table_on_tensors(ctx: Ctx, payload_path: str, device: str) -> Dict[str, Any]:
    """Every case of the shared metric table (read from ``payload_path``) fed tensors on ``device``, on this
    group's backend: :func:`metric_cases.run_all`'s report."""
    import metric_cases
    from _tensor_metrics import on_device

    payload = on_device(metric_cases.read_payload(payload_path), device)
    return metric_cases.run_all(ctx.backend(timeout=120.0), payload)


def _cuda_objects(rank: int) -> Dict[str, Any]:
    """An object holding CUDA tensors of every kind a model hands over (on the current device)."""
    import torch

    dev = torch.device("cuda", torch.cuda.current_device())
    base = torch.arange(24, dtype=torch.float32, device=dev).reshape(4, 6) + rank
    return {
        "f32": base,
        "bf16": base.to(torch.bfloat16),
        "f16": base.to(torch.float16),
        "i64": torch.arange(5, device=dev) * (rank + 1),
        "bool": base > 10,
        "strided": base.t(),  # not contiguous
        "scalar": torch.tensor(3.5 + rank, device=dev),
        "empty": torch.empty(0, 3, device=dev),
        "grad": torch.ones(3, device=dev, requires_grad=True),
        "rank": rank,
    }


def _same_on_current_device(got: Dict[str, Any], want: Dict[str, Any]) -> None:
    import torch

    current = torch.device("cuda", torch.cuda.current_device())
    for key, value in want.items():
        if not isinstance(value, torch.Tensor):
            assert got[key] == value, (key, got[key], value)
            continue
        t = got[key]
        assert isinstance(t, torch.Tensor), (key, type(t))
        assert t.device == current, f"{key}: rebuilt on {t.device}, the receiver's current device is {current}"
        assert t.dtype == value.dtype and t.shape == value.shape, (key, t.dtype, t.shape, value.dtype, value.shape)
        assert t.requires_grad == value.requires_grad, key
        assert torch.equal(t.detach().cpu(), value.detach().cpu()), key


@check
def cuda_objects(ctx: Ctx) -> Dict[str, Any]:
    """all_gather / gather / broadcast of objects holding CUDA tensors: each rebuilt on the receiver's device."""
    b = ctx.backend()
    mine = _cuda_objects(ctx.rank)
    gathered = b.all_gather_object(mine)
    for r, obj in enumerate(gathered):
        _same_on_current_device(obj, _cuda_objects(r))
    at_zero = b.gather_object(mine, dst=0)
    if ctx.rank == 0:
        for r, obj in enumerate(at_zero):
            _same_on_current_device(obj, _cuda_objects(r))
    else:
        assert at_zero is None, type(at_zero)
    sent = b.broadcast_object(mine if ctx.rank == 0 else None, src=0)
    _same_on_current_device(sent, _cuda_objects(0))
    return {"gathered": len(gathered)}


@check
def half_precision_logits(ctx: Ctx) -> Dict[str, Any]:
    """Accuracy of bf16 / fp16 CUDA logits equals that of the same (rounded) values as float32 numpy."""
    import torch

    from mmeval import Accuracy

    scores, labels = make_dataset(96, seed=ctx.rank)
    out: Dict[str, Any] = {}
    for dtype in (torch.bfloat16, torch.float16):
        logits = torch.from_numpy(scores).to(dtype)
        want = Accuracy(topk=(1, 3), dist_backend=ctx.backend())
        want.add(logits.float().numpy(), labels)
        got = Accuracy(topk=(1, 3), dist_backend=ctx.backend())
        got.add(logits.cuda(), torch.from_numpy(labels).cuda())
        out[str(dtype)] = (got.compute(), want.compute())
    return out


@check
def mixed_group(ctx: Ctx) -> Dict[str, Any]:
    """A ``cpu:gloo,cuda:nccl`` group: torch_cpu and torch_cuda both work on it; torch_cuda is auto-selected."""
    import torch

    from mmeval import Accuracy
    from mmeval.core.dist import resolve_backend_name
    from mmeval_torch import TorchCPUDist, TorchCUDADist

    out: Dict[str, Any] = {"auto": resolve_backend_name(None)}
    scores, labels = make_dataset(64, seed=ctx.rank)
    for cls in (TorchCPUDist, TorchCUDADist):
        b = ctx.backend(cls=cls)
        gathered = b.all_gather_object({"rank": ctx.rank, "t": torch.full((3,), float(ctx.rank), device="cuda")})
        assert [g["rank"] for g in gathered] == list(range(ctx.world_size))
        assert all(g["t"].device.type == "cuda" for g in gathered)
        metric = Accuracy(topk=(1, 3), dist_backend=b)
        metric.add(torch.from_numpy(scores).cuda(), torch.from_numpy(labels).cuda())
        out[cls.__name__] = metric.compute()
    return out


@check
def native_reductions(ctx: Ctx) -> Dict[str, Any]:
    """This group's backend reduces large arrays with the transport's all_reduce / reduce, never the byte gather,
    for every (op, dtype) it declares native -- integer sum / min / max, float sums -- with the exact result."""
    b = ctx.backend()
    byte_calls: List[str] = []
    doing = [""]
    for attr in ("_all_gather_bytes", "_gather_bytes"):  # the default payload stage must not run
        original = getattr(b, attr)
        setattr(b, attr, lambda call, _o=original, _a=attr: byte_calls.append(f"{_a} in {doing[0]}") or _o(call))
    ws, r = ctx.world_size, ctx.rank
    out: Dict[str, Any] = {}
    for dtype in (np.float64, np.float32, np.int64, np.int32, np.uint8):
        base = (np.arange(200_000) % 97).astype(dtype)
        for op, want in (("sum", base * ws + sum(range(ws))), ("max", base + (ws - 1)), ("min", base)):
            if op != "sum" and np.dtype(dtype).kind == "f":
                continue  # float min / max go by bytes by design (the plugin's native_reductions)
            doing[0] = f"{np.dtype(dtype).name}/{op}"
            got = b.all_reduce(base + np.asarray(r, dtype), op=op)
            out[f"{np.dtype(dtype).name}/{op}"] = bool(got.dtype == dtype and np.array_equal(got, want.astype(dtype)))
    doing[0] = "reduce"
    red = b.reduce(np.full((300, 10), r, np.int64), op="max", dst=ws - 1)
    out["reduce"] = None if red is None else bool(np.array_equal(red, np.full((300, 10), ws - 1)))
    out["byte_calls"] = byte_calls
    return out
