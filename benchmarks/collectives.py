"""Object collectives: mmeval's backend vs the framework's own object collective vs the raw transport.

For each payload (:data:`common.PAYLOADS`) and operation (all_gather, gather,
broadcast), on one backend at one world size, these methods run interleaved in
one process group (iteration ``i`` runs each once, in an order rotated by
``i``; a barrier before each call; the time is the slowest rank's):

=============  ==============================  =================================  ==============================
method         torch_cpu (gloo)                mpi4py                             torch_horovod (gloo)
=============  ==============================  =================================  ==============================
mmeval         ``TorchCPUDist.*_object``       ``MPI4PyDist.*_object``            ``TorchHorovodDist.*_object``
framework      ``dist.all_gather_object``,     ``comm.allgather`` / ``gather`` /  ``hvd.allgather_object``,
               ``gather_object``,              ``bcast`` (pickle)                 ``broadcast_object`` (no gather)
               ``broadcast_object_list``
pkl5           --                              ``mpi4py.util.pkl5`` (out-of-band) --
raw            ``all_gather_into_tensor`` /    ``Allgatherv`` / ``Gatherv`` /     ``hvd.allgather`` /
               ``gather`` / ``broadcast`` of   ``Bcast`` of a byte buffer         ``broadcast`` of a uint8 tensor
               a uint8 tensor, fresh receive   (fresh receive buffer)
               tensor
raw_prealloc   the same into a receive tensor  the same into a buffer allocated   --
               allocated once (the floor)      once (the floor)
=============  ==============================  =================================  ==============================

The raw methods move :func:`common.raw_nbytes` bytes per rank: the payload's
plain pickle. Every mmeval result is checked against the payloads during the
warm-up iteration.

Run one configuration (the suite's driver, ``run.py``, runs them all)::

    python benchmarks/collectives.py --backend torch_cpu --world-size 2 --out /tmp/t.json
    python benchmarks/collectives.py --backend mpi4py --world-size 2 --payloads arr64m --ops all_gather
    python benchmarks/collectives.py --backend torch_cpu --payloads tuples100k --ops gather --profile

torch_cpu spawns its ranks (gloo on 127.0.0.1); mpi4py relaunches itself under
the ``mpiexec`` next to this Python; torch_horovod must be started by
``horovodrun --gloo -np N``. ``MALLOC_MMAP_THRESHOLD_=65536`` is set for every
rank.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import pstats
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common
from common import ITERS, MALLOC_PIN, OPS, PAYLOADS, Method

#: Display names of the methods, per backend and operation.
LABELS: Dict[str, Dict[str, Dict[str, str]]] = {
    "torch_cpu": {
        "all_gather": {
            "mmeval": "mmeval all_gather_object",
            "framework": "torch all_gather_object",
            "raw": "gloo all_gather_into_tensor",
            "raw_prealloc": "gloo all_gather_into_tensor (prealloc)",
        },
        "gather": {
            "mmeval": "mmeval gather_object",
            "framework": "torch gather_object",
            "raw": "gloo gather",
            "raw_prealloc": "gloo gather (prealloc)",
        },
        "broadcast": {
            "mmeval": "mmeval broadcast_object",
            "framework": "torch broadcast_object_list",
            "raw": "gloo broadcast",
            "raw_prealloc": "gloo broadcast (prealloc)",
        },
    },
    "mpi4py": {
        "all_gather": {
            "mmeval": "mmeval all_gather_object",
            "framework": "mpi4py comm.allgather",
            "pkl5": "mpi4py pkl5 allgather",
            "raw": "MPI Allgatherv",
            "raw_prealloc": "MPI Allgatherv (prealloc)",
        },
        "gather": {
            "mmeval": "mmeval gather_object",
            "framework": "mpi4py comm.gather",
            "pkl5": "mpi4py pkl5 gather",
            "raw": "MPI Gatherv",
            "raw_prealloc": "MPI Gatherv (prealloc)",
        },
        "broadcast": {
            "mmeval": "mmeval broadcast_object",
            "framework": "mpi4py comm.bcast",
            "pkl5": "mpi4py pkl5 bcast",
            "raw": "MPI Bcast",
            "raw_prealloc": "MPI Bcast (prealloc)",
        },
    },
    "torch_horovod": {
        "all_gather": {
            "mmeval": "mmeval all_gather_object",
            "framework": "hvd.allgather_object",
            "raw": "hvd.allgather",
        },
        "gather": {"mmeval": "mmeval gather_object"},
        "broadcast": {"mmeval": "mmeval broadcast_object", "framework": "hvd.broadcast_object", "raw": "hvd.broadcast"},
    },
}


def _framework_peak_factor(op: str, ws: int) -> float:
    """Rough peak bytes per payload byte of a rank running the framework's pickle-based collective."""
    return {"all_gather": 3 + 2.5 * ws, "gather": 3 + 2.5 * ws, "broadcast": 5.0}[op]


def _backend(name: str, impl: str, comm: Any = None) -> Any:
    """The mmeval backend object timed as method ``mmeval``: this project's, or MMEval 0.2.1's."""
    if impl == "mmeval021":  # MMEval 0.2.1, in its own environment: its backends are in the core
        from mmeval.core.dist_backends import MPI4PyDist, TorchCPUDist

        return TorchCPUDist() if name == "torch_cpu" else MPI4PyDist()
    if name == "torch_cpu":
        from mmeval_torch import TorchCPUDist as Ours

        return Ours(timeout=900)
    from mmeval_mpi4py import MPI4PyDist as OursMPI

    return OursMPI(comm, timeout=900)


def _fresh_tensor(nbytes: int) -> Any:
    """A fresh uint8 CPU tensor, allocated the fastest way (numpy memory: transparent huge pages for big ones).

    torch.empty faults large buffers in 4 KiB at a time; the raw baselines must
    not pay for that where mmeval does not.
    """
    import torch

    if nbytes >= common.MB:
        return torch.from_numpy(np.empty(nbytes, dtype=np.uint8))
    return torch.empty(nbytes, dtype=torch.uint8)


class Side:
    """One rank's view of a backend: sync helpers and the methods to time."""

    name = ""
    rank = 0
    ws = 1

    def barrier(self) -> None:
        raise NotImplementedError

    def max_over_ranks(self, value: float) -> float:
        raise NotImplementedError

    def methods(self, op: str, payload: Any, nbytes: int) -> Dict[str, Method]:
        raise NotImplementedError

    def close(self) -> None:
        """Tear the group down."""

    def meta(self) -> Dict[str, Any]:
        return {}


class TorchSide(Side):
    """torch_cpu over gloo on 127.0.0.1."""

    name = "torch_cpu"

    def __init__(self, rank: int, ws: int, port: int, impl: str = "ours") -> None:
        import torch
        import torch.distributed as dist

        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws, timeout=timedelta(seconds=900)
        )
        self.torch, self.dist = torch, dist
        self.rank, self.ws = rank, ws
        self.backend = _backend("torch_cpu", impl)
        self._worst = torch.zeros(1, dtype=torch.float64)
        self._gather_into = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    def barrier(self) -> None:
        self.dist.barrier()

    def max_over_ranks(self, value: float) -> float:
        self._worst[0] = value
        self.dist.all_reduce(self._worst, op=self.dist.ReduceOp.MAX)
        return float(self._worst[0])

    def meta(self) -> Dict[str, Any]:
        return {"torch": self.torch.__version__, "transport": "gloo on 127.0.0.1"}

    def methods(self, op: str, payload: Any, nbytes: int) -> Dict[str, Method]:
        torch, dist, backend = self.torch, self.dist, self.backend
        rank, ws = self.rank, self.ws
        src = torch.ones(nbytes, dtype=torch.uint8)
        if op == "all_gather":
            pre = torch.empty(nbytes * ws, dtype=torch.uint8)

            def framework() -> Any:
                out: List[Any] = [None] * ws
                dist.all_gather_object(out, payload)
                return out

            def raw() -> Any:
                recv = _fresh_tensor(nbytes * ws)
                self._gather_into(recv, src)
                return recv

            return {
                "mmeval": lambda: backend.all_gather_object(payload),
                "framework": framework,
                "raw": raw,
                "raw_prealloc": lambda: self._gather_into(pre, src),
            }
        if op == "gather":
            pre_list = [torch.empty(nbytes, dtype=torch.uint8) for _ in range(ws)] if rank == 0 else None

            def framework() -> Any:
                out: Optional[List[Any]] = [None] * ws if rank == 0 else None
                dist.gather_object(payload, out, dst=0)
                return out

            def raw() -> Any:
                recv = [_fresh_tensor(nbytes) for _ in range(ws)] if rank == 0 else None
                dist.gather(src, recv, dst=0)
                return recv

            return {
                "mmeval": lambda: backend.gather_object(payload, dst=0),
                "framework": framework,
                "raw": raw,
                "raw_prealloc": lambda: dist.gather(src, pre_list, dst=0),
            }
        if op == "broadcast":
            pre = src if rank == 0 else torch.empty(nbytes, dtype=torch.uint8)
            mine = payload if rank == 0 else None

            def framework() -> Any:
                box = [mine]
                dist.broadcast_object_list(box, src=0)
                return box[0]

            def raw() -> Any:
                buf = src if rank == 0 else _fresh_tensor(nbytes)
                dist.broadcast(buf, src=0)
                return buf

            return {
                "mmeval": lambda: backend.broadcast_object(mine, src=0),
                "framework": framework,
                "raw": raw,
                "raw_prealloc": lambda: dist.broadcast(pre, src=0),
            }
        raise ValueError(op)

    def close(self) -> None:
        self.dist.destroy_process_group()


class MPISide(Side):
    """mpi4py under mpiexec."""

    name = "mpi4py"

    def __init__(self, impl: str = "ours") -> None:
        from mpi4py import MPI
        from mpi4py.util import pkl5

        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        self.pcomm = pkl5.Intracomm(self.comm)
        self.rank, self.ws = self.comm.Get_rank(), self.comm.Get_size()
        self.backend = _backend("mpi4py", impl, self.comm)

    def barrier(self) -> None:
        self.comm.Barrier()

    def max_over_ranks(self, value: float) -> float:
        return float(self.comm.allreduce(value, op=self.MPI.MAX))

    def meta(self) -> Dict[str, Any]:
        import mpi4py

        return {"mpi4py": mpi4py.__version__, "mpi": self.MPI.Get_library_version().splitlines()[0].strip()}

    def methods(self, op: str, payload: Any, nbytes: int) -> Dict[str, Method]:
        MPI, comm, pcomm, backend = self.MPI, self.comm, self.pcomm, self.backend
        rank, ws = self.rank, self.ws
        src = np.ones(nbytes, dtype=np.uint8)
        counts, displs = [nbytes] * ws, [r * nbytes for r in range(ws)]
        if op == "all_gather":
            pre = np.empty(nbytes * ws, dtype=np.uint8)

            def raw() -> Any:
                recv = np.empty(nbytes * ws, dtype=np.uint8)
                comm.Allgatherv([src, MPI.BYTE], [recv, (counts, displs), MPI.BYTE])
                return recv

            return {
                "mmeval": lambda: backend.all_gather_object(payload),
                "framework": lambda: comm.allgather(payload),
                "pkl5": lambda: pcomm.allgather(payload),
                "raw": raw,
                "raw_prealloc": lambda: comm.Allgatherv([src, MPI.BYTE], [pre, (counts, displs), MPI.BYTE]),
            }
        if op == "gather":
            pre_g = np.empty(nbytes * ws, dtype=np.uint8) if rank == 0 else None

            def raw() -> Any:
                recv = np.empty(nbytes * ws, dtype=np.uint8) if rank == 0 else None
                comm.Gatherv([src, MPI.BYTE], [recv, (counts, displs), MPI.BYTE] if rank == 0 else None, root=0)
                return recv

            def raw_prealloc() -> Any:
                comm.Gatherv([src, MPI.BYTE], [pre_g, (counts, displs), MPI.BYTE] if rank == 0 else None, root=0)

            return {
                "mmeval": lambda: backend.gather_object(payload, dst=0),
                "framework": lambda: comm.gather(payload, root=0),
                "pkl5": lambda: pcomm.gather(payload, root=0),
                "raw": raw,
                "raw_prealloc": raw_prealloc,
            }
        if op == "broadcast":
            mine = payload if rank == 0 else None
            pre_b = src if rank == 0 else np.empty(nbytes, dtype=np.uint8)

            def raw() -> Any:
                buf = src if rank == 0 else np.empty(nbytes, dtype=np.uint8)
                comm.Bcast([buf, MPI.BYTE], root=0)
                return buf

            return {
                "mmeval": lambda: backend.broadcast_object(mine, src=0),
                "framework": lambda: comm.bcast(mine, root=0),
                "pkl5": lambda: pcomm.bcast(mine, root=0),
                "raw": raw,
                "raw_prealloc": lambda: comm.Bcast([pre_b, MPI.BYTE], root=0),
            }
        raise ValueError(op)


class HorovodSide(Side):
    """torch_horovod under ``horovodrun --gloo``."""

    name = "torch_horovod"

    def __init__(self) -> None:
        import horovod.torch as hvd
        import torch

        from mmeval_horovod import TorchHorovodDist

        hvd.init()
        self.hvd, self.torch = hvd, torch
        self.rank, self.ws = hvd.rank(), hvd.size()
        self.backend = TorchHorovodDist(timeout=900)
        self._n = 0

    def barrier(self) -> None:
        self.hvd.barrier()

    def max_over_ranks(self, value: float) -> float:
        self._n += 1
        out = self.hvd.allreduce(
            self.torch.tensor([value], dtype=self.torch.float64), op=self.hvd.Max, name=f"bench.max.{self._n}"
        )
        return float(out[0])

    def meta(self) -> Dict[str, Any]:
        import horovod

        return {"torch": self.torch.__version__, "horovod": horovod.__version__, "transport": "horovod gloo"}

    def methods(self, op: str, payload: Any, nbytes: int) -> Dict[str, Method]:
        hvd, torch, backend = self.hvd, self.torch, self.backend
        src = torch.ones(nbytes, dtype=torch.uint8)
        mine = payload if self.rank == 0 else None
        if op == "all_gather":
            return {
                "mmeval": lambda: backend.all_gather_object(payload),
                "framework": lambda: hvd.allgather_object(payload),
                "raw": lambda: hvd.allgather(src),
            }
        if op == "gather":
            return {"mmeval": lambda: backend.gather_object(payload, dst=0)}
        if op == "broadcast":
            return {
                "mmeval": lambda: backend.broadcast_object(mine, src=0),
                # named: by default Horovod names it after type(obj), which differs between root and others
                "framework": lambda: hvd.broadcast_object(mine, root_rank=0, name="bench.broadcast_object"),
                "raw": lambda: hvd.broadcast(src, root_rank=0),
            }
        raise ValueError(op)


# --------------------------------------------------------------------------
# one rank
# --------------------------------------------------------------------------


def _checker(side: Side, op: str, name: str) -> Callable[[str, Any], None]:
    """Check mmeval's result of the warm-up iteration on every rank that receives one."""

    def check(method: str, out: Any) -> None:
        if method != "mmeval":
            return
        if op == "broadcast":
            common.check_payload(name, out, 0)
        elif op == "all_gather" or side.rank == 0:
            assert isinstance(out, list) and len(out) == side.ws, f"{op}: {type(out)}"
            for r, got in enumerate(out):
                common.check_payload(name, got, r)
        else:
            assert out is None, f"gather_object returned {type(out)} on a non-destination rank"

    return check


def run_rank(side: Side, args: argparse.Namespace) -> List[Dict[str, Any]]:
    """Time every payload x operation on this rank; return the records (complete on rank 0).

    Rank 0 rewrites ``--out`` after every payload, so a run killed by its
    timeout still leaves what it measured.
    """
    records: List[Dict[str, Any]] = []
    for name in args.payloads:
        payload = common.make_payload(name, side.rank)
        nbytes = common.raw_nbytes(payload)
        iters = max(1, round(ITERS[name] * args.iters_scale))
        for op in args.ops:
            methods = side.methods(op, payload, nbytes)
            skipped: Dict[str, str] = {}
            if "framework" in methods:  # pickle-based collectives hold several copies per rank: skip if RAM is short
                need = nbytes * _framework_peak_factor(op, side.ws) * side.ws
                short = side.max_over_ranks(1.0 if common.mem_available() < 1.25 * need else 0.0)
                if short:
                    for key in [k for k in methods if k in ("framework", "pkl5")]:
                        skipped[key] = f"skipped: needs ~{need / 2**30:.1f} GiB of free RAM across the ranks"
                        del methods[key]
            if args.only:
                methods = {k: v for k, v in methods.items() if k in args.only}
            t0 = time.monotonic()
            warmup = 0 if name in common.NO_WARMUP else args.warmup
            times = common.interleaved(
                methods, iters, warmup, side.barrier, side.max_over_ranks, after=_checker(side, op, name)
            )
            wall = time.monotonic() - t0
            for key, values in times.items():
                label = LABELS[side.name][op].get(key, key)
                if key == "mmeval" and args.impl == "mmeval021":
                    label = label.replace("mmeval", "MMEval 0.2.1")
                records.append(
                    {
                        "kind": "collective",
                        "impl": args.impl,
                        "backend": side.name,
                        "ws": side.ws,
                        "op": op,
                        "payload": name,
                        "method": key,
                        "label": label,
                        "bytes": nbytes,
                        "times_s": values,
                        "median_s": common.median(values),
                    }
                )
            for key, why in skipped.items():
                records.append(
                    {
                        "kind": "collective",
                        "impl": args.impl,
                        "backend": side.name,
                        "ws": side.ws,
                        "op": op,
                        "payload": name,
                        "method": key,
                        "label": LABELS[side.name][op].get(key, key),
                        "bytes": nbytes,
                        "times_s": [],
                        "median_s": float("nan"),
                        "note": why,
                    }
                )
            if side.rank == 0:
                med = {k: common.median(v) * 1e3 for k, v in times.items()}
                print(
                    f"  {side.name}{'(0.2.1)' if args.impl == 'mmeval021' else ''} ws={side.ws} {op:10s} {name:10s} "
                    + " ".join(f"{k}={v:.2f}ms" for k, v in med.items())
                    + f"  [{wall:.0f}s]",
                    flush=True,
                )
            del methods
            gc.collect()
        if args.profile:  # every rank takes part in the calls; ranks 0 and 1 profile them
            _profile(side, args, name, payload, nbytes)
        del payload
        gc.collect()
        _finish(side, args, records)
    return records


def _profile(side: Side, args: argparse.Namespace, name: str, payload: Any, nbytes: int) -> None:
    """cProfile mmeval's call of every operation on ranks 0 and 1 (printed); the other ranks just call it."""
    report = side.rank in (0, 1)
    for op in args.ops:
        call = side.methods(op, payload, nbytes)["mmeval"]
        prof = cProfile.Profile()
        for _ in range(3):
            side.barrier()
            if report:
                prof.enable()
            call()
            if report:
                prof.disable()
        if not report:
            side.barrier()
            continue
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(14)
        print(
            f"\ncProfile, rank {side.rank}, 3 x mmeval {op} of {name} ({side.name}, ws={side.ws}):\n" + text.getvalue(),
            flush=True,
        )
        side.barrier()


def _finish(side: Side, args: argparse.Namespace, records: List[Dict[str, Any]]) -> None:
    if side.rank == 0 and args.out:
        common.write_json(
            Path(args.out),
            {"meta": {**side.meta(), "env": {k: os.environ.get(k) for k in MALLOC_PIN}}, "records": records},
        )


def torch_worker(rank: int, ws: int, port: int, args: argparse.Namespace) -> None:
    """Entry point of a spawned torch_cpu rank."""
    side = TorchSide(rank, ws, port, args.impl)
    try:
        _finish(side, args, run_rank(side, args))
    finally:
        side.close()


# --------------------------------------------------------------------------
# launching
# --------------------------------------------------------------------------


def _under_mpi() -> bool:
    return any(k in os.environ for k in ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"))


def mpiexec_path() -> Optional[str]:
    """The ``mpiexec`` next to this Python (the mpich wheel's), else on PATH."""
    bindir = os.path.dirname(sys.executable)
    return shutil.which("mpiexec", path=bindir + os.pathsep + os.environ.get("PATH", ""))


def relaunch_mpi(argv: List[str], ws: int, timeout: float) -> int:
    """Run this script under ``mpiexec -n ws`` with the allocator pinned."""
    mpiexec = mpiexec_path()
    if mpiexec is None:
        print("mpiexec not found next to this Python or on PATH (pip install mpich)", file=sys.stderr)
        return 2
    env = dict(os.environ, **MALLOC_PIN)
    cmd = [mpiexec, "-n", str(ws), sys.executable, os.path.abspath(__file__), *argv]
    try:
        return subprocess.run(cmd, env=env, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"mpiexec run exceeded {timeout:g}s and was killed", file=sys.stderr)
        return 124


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=("torch_cpu", "mpi4py", "torch_horovod"), default="torch_cpu")
    parser.add_argument(
        "--impl",
        choices=("ours", "mmeval021"),
        default="ours",
        help="whose backend is method 'mmeval': this project's or MMEval 0.2.1's (run with its env)",
    )
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--payloads", nargs="+", default=list(PAYLOADS), choices=PAYLOADS)
    parser.add_argument("--ops", nargs="+", default=list(OPS), choices=OPS)
    parser.add_argument("--only", nargs="+", default=None, help="run only these methods (mmeval, framework, ...)")
    parser.add_argument("--iters-scale", type=float, default=1.0, help="multiply every payload's iteration count")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1500, help="seconds before the launch is killed")
    parser.add_argument("--profile", action="store_true", help="cProfile mmeval's calls on ranks 0 and 1")
    parser.add_argument("--out", default=None, help="write the records (JSON) here")
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    os.environ.update(MALLOC_PIN)  # inherited by spawned ranks; mpiexec gets it from relaunch_mpi
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.backend == "mpi4py":
        if not _under_mpi():
            return relaunch_mpi(list(argv if argv is not None else sys.argv[1:]), args.world_size, args.timeout)
        side: Side = MPISide(args.impl)
        _finish(side, args, run_rank(side, args))
        return 0
    if args.backend == "torch_horovod":
        side = HorovodSide()
        _finish(side, args, run_rank(side, args))
        return 0
    return common.spawn_torch_ranks(torch_worker, args.world_size, args, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
