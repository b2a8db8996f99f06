"""One rank of a test group: ``python jax_worker.py PORT WORLD_SIZE RANK OUT_DIR SCENARIO ARGS_JSON``.

Initializes multi-process JAX (gloo CPU collectives), runs ``SCENARIO`` and
writes ``OUT_DIR/rank{RANK}.json``: ``{"result": ...}``, or ``{"error": ...}``
with the exception's type, message, MRO and the seconds it took to surface.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any, Callable, Dict, List

import numpy as np


def _accuracy_case(n: int = 1001) -> Any:
    rng = np.random.default_rng(7)
    return rng.random((n, 5)).astype(np.float32), rng.integers(0, 5, n)


def _shard(n: int, rank: int, ws: int, how: str) -> List[int]:
    if how == "padded":  # DistributedSampler: round-robin over the list padded with its own head
        total = -(-n // ws) * ws
        return (list(range(n)) + list(range(total - n)))[rank::ws]
    return list(range(n))[rank::ws]  # uneven: ranks hold n // ws or n // ws + 1 samples


#: Local devices per process in the conformance scenario: device 0 for the suite, one per terminal check.
CONFORMANCE_DEVICES = 4


def conformance(rank: int, ws: int) -> Any:
    """The suite on device 0; each terminal check (it poisons its group) on a new group: the next local device."""
    from mmeval_jax import JaxDist

    from mmeval.testing.conformance import check_backend

    devices = iter(range(1, CONFORMANCE_DEVICES))

    def fresh(timeout: float) -> JaxDist:
        return JaxDist(device=next(devices), timeout=timeout)

    backend = JaxDist(timeout=120)
    done = check_backend(backend, faults=True, fresh=fresh)
    # device 0's group is untouched by the stuck transfers of the poisoned ones: every rank reports before any
    # exits (a process leaving first fails JAX's shutdown barrier for the late ones)
    backend.barrier()
    return done


def evaluate(rank: int, ws: int, how: str, backend: str) -> Any:
    """Accuracy over ``how`` shards, backend auto-selected (``'auto'``) or named; the metric and the pick."""
    from mmeval import Accuracy
    from mmeval.core.dist import get_dist_backend

    scores, labels = _accuracy_case()
    acc = Accuracy(topk=(1, 3), dist_backend=None if backend == "auto" else backend)
    idx = _shard(len(labels), rank, ws, how)
    for start in range(0, len(idx), 50):
        batch = idx[start : start + 50]
        acc.add(scores[batch], labels[batch])
    chosen = get_dist_backend(None).name if backend == "auto" else backend
    return {"metric": acc.compute(size=len(labels)), "backend": chosen, "single": Accuracy(topk=(1, 3))(scores, labels)}


def jax_arrays(rank: int, ws: int) -> Any:
    """Accuracy fed with jax arrays (scores and labels) over padded shards, and the numpy reference."""
    import jax.numpy as jnp

    from mmeval import Accuracy

    scores, labels = _accuracy_case()
    acc = Accuracy(topk=(1, 3), dist_backend="jax")
    idx = _shard(len(labels), rank, ws, "padded")
    for start in range(0, len(idx), 50):
        batch = idx[start : start + 50]
        acc.add(jnp.asarray(scores[batch]), jnp.asarray(labels[batch]))
    return {"metric": acc.compute(size=len(labels)), "single": Accuracy(topk=(1, 3))(scores, labels)}


def subgroup(rank: int, ws: int, members: List[int]) -> Any:
    """A group of ``members``; members gather, broadcast and evaluate in it; then every process all-gathers."""
    from mmeval_jax import JaxDist

    from mmeval import Accuracy

    out: Dict[str, Any] = {}
    if rank in members:
        g = JaxDist(members, timeout=60)
        out["rank"], out["world_size"] = g.rank, g.world_size
        out["gathered"] = g.all_gather_object(("p", rank, np.full(3, rank)))
        out["gathered"] = [[a, b, c.tolist()] for a, b, c in out["gathered"]]
        out["to_last"] = g.gather_object(rank * 10, dst=g.world_size - 1)
        out["bcast"] = g.broadcast_object(f"from {rank}" if g.rank == 1 else None, src=1)
        scores, labels = _accuracy_case()
        acc = Accuracy(topk=(1,), dist_backend=g)
        idx = _shard(len(labels), g.rank, g.world_size, "uneven")
        acc.add(scores[idx], labels[idx])
        out["metric"] = acc.compute(size=len(labels))
        out["single"] = Accuracy(topk=(1,))(scores, labels)
    else:
        try:
            out["outsider"] = f"got rank {JaxDist(members).rank}"
        except RuntimeError as exc:  # the same error as every backend's (plugin_kit.not_a_member)
            out["outsider"] = str(exc)
    out["world"] = JaxDist(timeout=60).all_gather_object(rank)
    return out


def die_before(rank: int, ws: int, dying: int, timeout: float) -> Any:
    """Rank ``dying`` exits before the collective; the others all-gather (and the error is reported)."""
    from mmeval_jax import JaxDist

    backend = JaxDist(timeout=timeout)
    backend.barrier()  # everyone is up and the programs are compiled
    if rank == dying:
        os._exit(3)
    time.sleep(0.5)
    return backend.all_gather_object(np.zeros(1000))


def stay_away(rank: int, ws: int, idle: int, timeout: float) -> Any:
    """Rank ``idle`` never calls the collective; the others time out, then a second call fails fast and says why."""
    from mmeval_jax import JaxDist

    backend = JaxDist(timeout=timeout)
    backend.barrier()
    if rank == idle:
        time.sleep(timeout * 2 + 4)
        return {"idle": True}
    errors = []
    for _ in range(2):
        start = time.monotonic()
        try:
            backend.all_gather_object(rank)
        except Exception as exc:
            errors.append(
                {
                    "type": type(exc).__name__,
                    "message": str(exc),
                    "mro": [c.__name__ for c in type(exc).__mro__],
                    "elapsed": time.monotonic() - start,
                }
            )
    return {"errors": errors}


def rank0_memory(rank: int, ws: int, rows: int) -> Any:
    """The first per-sample compute() of the process: rank 0's peak extra memory and the result."""
    from mmeval_jax import JaxDist

    from mmeval.testing.rank0_memory import measure_rank0_memory

    backend = JaxDist(timeout=120)
    measured = measure_rank0_memory(backend, rows)
    backend.barrier()  # every rank reports before any exits (JAX's shutdown barrier)
    return measured


def gather_rounds(rank: int, ws: int) -> Any:
    """gather_object of arrays of a different size on every rank, to the last rank (rounds set by the test)."""
    from mmeval_jax import JaxDist

    def uneven(r: int) -> np.ndarray:
        return np.arange(r * 3001 + 7, dtype=np.int16)

    backend = JaxDist(timeout=120)
    got = backend.gather_object({"rank": rank, "data": uneven(rank)}, dst=ws - 1)
    backend.barrier()
    if got is None:
        return None
    return [[g["rank"], bool(np.array_equal(g["data"], uneven(r)))] for r, g in enumerate(got)]


SCENARIOS: Dict[str, Callable[..., Any]] = {
    "gather_rounds": gather_rounds,
    "rank0_memory": rank0_memory,
    "conformance": conformance,
    "evaluate": evaluate,
    "jax_arrays": jax_arrays,
    "subgroup": subgroup,
    "die_before": die_before,
    "stay_away": stay_away,
}


def main() -> None:
    port, ws, rank, out_dir, scenario, raw = sys.argv[1:7]
    world_size, me = int(ws), int(rank)
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if scenario == "conformance":
        jax.config.update("jax_num_cpu_devices", CONFORMANCE_DEVICES)
    jax.distributed.initialize(
        f"127.0.0.1:{port}",
        num_processes=world_size,
        process_id=me,
        initialization_timeout=60,
        shutdown_timeout_seconds=5,
    )
    outcome: Dict[str, Any]
    start = time.monotonic()
    try:
        outcome = {"result": SCENARIOS[scenario](me, world_size, *json.loads(raw))}
    except Exception as exc:
        outcome = {
            "error": {
                "type": type(exc).__name__,
                "message": str(exc),
                "mro": [c.__name__ for c in type(exc).__mro__],
                "elapsed": time.monotonic() - start,
            },
            "traceback": traceback.format_exc(),
        }
    tmp = os.path.join(out_dir, f"rank{me}.json.tmp")
    with open(tmp, "w") as f:
        json.dump(outcome, f, default=repr)
    os.replace(tmp, os.path.join(out_dir, f"rank{me}.json"))


if __name__ == "__main__":
    main()
