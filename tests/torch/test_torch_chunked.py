"""mmeval-torch: gather (point to point), broadcast and all-gather of large frames in chunks, over real gloo ranks.

The chunk constants are lowered in the ranks (4 KiB chunks from 8 KiB on) so
that frames of a few KiB take the chunked path: sizes below, at and above the
threshold, not multiples of the chunk, every root, frames of several arrays
(chunks that straddle segments are staged, the others sent from the arrays'
memory, read-only ones included), sizes that differ per rank, and a plain fill
callback (no ``write_range`` / ``parts``) next to the core's frames.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any, Dict, List

import numpy as np
import pytest

from mmeval.testing.ranks import free_port, run_ranks, values

torch = pytest.importorskip("torch")
pytest.importorskip("mmeval_torch")

SIZES = (1000, 8191, 8192, 8193, 4096 * 5 + 17, 200_000)


def _payload(rank: int, n: int) -> Dict[str, Any]:
    return {"rank": rank, "data": (np.arange(n, dtype=np.int64) * 7 + rank).astype(np.uint8)}


def _multi(rank: int, n: int) -> Dict[str, Any]:
    """Several arrays (one read-only, one not a multiple of 64 bytes), of sizes that differ per rank."""
    ro = np.arange(n // 2 + 1000 * rank, dtype=np.int32) + rank
    ro.flags.writeable = False
    return {
        "rank": rank,
        "a": ro,
        "b": (np.arange(n // 3 + 5, dtype=np.int64) % 251).astype(np.uint8),
        "c": np.full(n // 5 + 3, rank, dtype=np.float64),
    }


def _same(a: Dict[str, Any], b: Dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(
        np.array_equal(v, b[k]) if isinstance(v, np.ndarray) else v == b[k] for k, v in a.items()
    )


def _worker(rank: int, ws: int, port: int, out_dir: str) -> None:
    import torch.distributed as dist

    import mmeval_torch.backends as backends
    from mmeval_torch import TorchCPUDist

    backends.CHUNK_BYTES = 4096
    backends.CHUNKED_MIN = 8192
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ws, timeout=timedelta(seconds=60)
    )
    b = TorchCPUDist(timeout=60)
    failures: List[str] = []
    try:
        for n in SIZES:
            for root in range(ws):
                got = b.gather_object(_payload(rank, n), dst=root)
                if rank == root:
                    assert got is not None
                    for r, item in enumerate(got):
                        if item["rank"] != r or not np.array_equal(item["data"], _payload(r, n)["data"]):
                            failures.append(f"gather n={n} root={root}: rank {r}'s payload differs")
                elif got is not None:
                    failures.append(f"gather n={n} root={root}: non-root got {type(got)}")
                got = b.broadcast_object(_payload(root, n) if rank == root else None, src=root)
                if got["rank"] != root or not np.array_equal(got["data"], _payload(root, n)["data"]):
                    failures.append(f"broadcast n={n} root={root}: wrong payload")
                got = b.gather_object(_multi(rank, n), dst=root)
                if rank == root and not all(_same(item, _multi(r, n)) for r, item in enumerate(got)):
                    failures.append(f"gather (several arrays) n={n} root={root}: wrong payload")
                got = b.broadcast_object(_multi(root, n) if rank == root else None, src=root)
                if not _same(got, _multi(root, n)):
                    failures.append(f"broadcast (several arrays) n={n} root={root}: wrong payload")
            for make in (_payload, _multi):
                got = b.all_gather_object(make(rank, n))
                failures += [
                    f"all_gather {make.__name__} n={n}: rank {r}'s payload differs"
                    for r, item in enumerate(got)
                    if not _same(item, make(r, n))
                ]
            # one rank's frame chunked, the others small
            got = b.all_gather_object(_payload(rank, n if rank == 1 else 10 * rank))
            failures += [
                f"all_gather mixed n={n}: rank {r}'s payload differs"
                for r, item in enumerate(got)
                if not _same(item, _payload(r, n if r == 1 else 10 * r))
            ]
        # the primitives called directly with a Call, as the core does: a frame of one segment
        from mmeval.core.dist_backends.transport import Call
        from mmeval.core.wire import Frame

        blob = bytes(range(256)) * 100  # 25,600 bytes
        frame = Frame([(0, memoryview(blob))], len(blob))
        empty = Frame([], 0)

        def call(op: str, sizes: List[int], root: int = -1, mine: Any = frame) -> Call:
            c = Call("torch_cpu", op, 0, rank, ws, root, 60.0, mine)
            c.sizes = sizes
            return c

        sizes = [len(blob)] * ws
        blocks = b._gather_bytes(call("gather_object", sizes, 0))
        if rank == 0:
            assert blocks is not None
            failures += [f"one-segment frame: rank {r}" for r, blk in enumerate(blocks) if bytes(blk) != blob]
        data = b._broadcast_bytes(
            call("broadcast_object", [len(blob) if r == 0 else 0 for r in range(ws)], 0, frame if rank == 0 else None)
        )
        if rank != 0 and (data is None or bytes(data) != blob):
            failures.append("one-segment frame broadcast")
        blocks = b._all_gather_bytes(call("all_gather_object", sizes))
        failures += [f"one-segment all-gather: rank {r}" for r, blk in enumerate(blocks) if bytes(blk) != blob]
        sizes = [len(blob) if r != 1 else 0 for r in range(ws)]  # a rank with nothing to send
        blocks = b._all_gather_bytes(call("all_gather_object", sizes, mine=frame if rank != 1 else empty))
        failures += [
            f"one-segment all-gather, rank 1 empty: rank {r}"
            for r, blk in enumerate(blocks)
            if bytes(blk) != (blob if r != 1 else b"")
        ]
    except Exception as exc:  # reported to the parent, which fails the test
        failures.append(f"{type(exc).__name__}: {exc}")
    finally:
        with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as fh:
            fh.write("\n".join(failures))
        dist.destroy_process_group()


@pytest.mark.parametrize("ws", [2, 3])
def test_chunked_gather_and_broadcast_deliver_every_byte(ws: int, tmp_path: Any) -> None:
    values(run_ranks(_worker, ws, free_port(), str(tmp_path), timeout=240, env={"GLOO_SOCKET_IFNAME": "lo"}))
    reports = [(tmp_path / f"rank{r}.txt").read_text() for r in range(ws)]
    assert reports == [""] * ws, reports
