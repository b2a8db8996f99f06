"""End-to-end distributed evaluation with Accuracy over MPI, checked against the single-process result.

Run as ``mpiexec -n N python evaluate.py`` (any N, or with no launcher). The
metrics are built BEFORE anything imports ``mpi4py.MPI``:

* ``auto``: ``Accuracy(topk=(1, 3))`` with no backend named -- auto-selection
  must pick ``mpi4py`` under a launcher with N > 1 and ``non_dist`` otherwise;
* ``named``: ``Accuracy(topk=(1, 3), dist_backend='mpi4py')`` as in MMEval's tutorial.

Shards of a dataset of N_SAMPLES (which no world size of 2..4 divides):
padded like ``DistributedSampler`` (indices padded to a multiple of the world
size, dealt ``rank::ws``), uneven (dealt ``rank::ws`` without padding), and
contiguous uneven chunks (``dist_collect_mode='cat'``). ``compute(size=N)``
must equal, on every rank, the result of one process over the whole dataset.
An object-results metric checks that samples come back in dataset order.
Finally the tutorial's own flow (``from mpi4py import MPI`` first) and a
``COMM_WORLD.Split`` group as the evaluation group.
"""

from __future__ import annotations

import sys
from typing import Any, Dict, List

import numpy as np
from _harness import Checker, launcher_rank, report

N_SAMPLES = 1001
NUM_CLASSES = 10
BATCH = 37


def dataset() -> tuple:
    rng = np.random.default_rng(2024)
    scores = rng.random((N_SAMPLES, NUM_CLASSES), dtype=np.float64)
    labels = rng.integers(0, NUM_CLASSES, N_SAMPLES)
    # make some predictions right so the accuracies are not all near chance
    hit = rng.random(N_SAMPLES) < 0.4
    scores[hit, labels[hit]] += 1.0
    return scores, labels


def padded_shard(rank: int, ws: int) -> np.ndarray:
    """DistributedSampler(shuffle=False): pad to a multiple of ws by wrapping around, deal rank::ws."""
    indices = list(range(N_SAMPLES))
    total = -(-N_SAMPLES // ws) * ws
    indices += indices[: total - N_SAMPLES]
    return np.asarray(indices[rank::ws])


def uneven_shard(rank: int, ws: int) -> np.ndarray:
    return np.arange(N_SAMPLES)[rank::ws]


def contiguous_shard(rank: int, ws: int) -> np.ndarray:
    return np.array_split(np.arange(N_SAMPLES), ws)[rank]


def feed(metric: Any, indices: np.ndarray, scores: np.ndarray, labels: np.ndarray) -> None:
    for start in range(0, len(indices), BATCH):
        idx = indices[start : start + BATCH]
        metric.add(scores[idx], labels[idx])


def main() -> None:
    import mmeval
    from mmeval.core import BaseMetric

    c = Checker()
    rank = launcher_rank()

    class SampleOrder(BaseMetric):
        """Object results (one tuple per sample): compute_metric returns the sample ids in order."""

        def add(self, ids: Any) -> None:  # type: ignore[override]
            self._results.extend((int(i), f"s{int(i)}") for i in ids)

        def compute_metric(self, results: List[Any]) -> Dict[str, Any]:
            return {"ids": [i for i, _ in results], "tags_ok": all(t == f"s{i}" for i, t in results)}

    # Built before MPI is imported; no backend named / the tutorial's name.
    auto = {kind: mmeval.Accuracy(topk=(1, 3)) for kind in ("padded", "uneven")}
    auto["cat"] = mmeval.Accuracy(topk=(1, 3), dist_collect_mode="cat")
    named = mmeval.Accuracy(topk=(1, 3), dist_backend="mpi4py")
    order_unzip = SampleOrder()
    order_cat = SampleOrder(dist_collect_mode="cat")
    c.check("MPI not imported by building metrics", "mpi4py.MPI" not in sys.modules)

    from mmeval.core.dist import resolve_backend_name

    chosen = resolve_backend_name(None)
    c.info["auto"] = chosen
    c.check("auto-selection did not import MPI", "mpi4py.MPI" not in sys.modules)

    scores, labels = dataset()
    reference = mmeval.Accuracy(topk=(1, 3), dist_backend="non_dist")
    feed(reference, np.arange(N_SAMPLES), scores, labels)
    expected = reference.compute()
    c.info["expected"] = expected

    # The launcher's world size, before MPI: the backend's answer must not need MPI_Init.
    from mmeval_mpi4py import launcher_world_size

    ws = launcher_world_size() or 1
    c.equal("auto-selected backend", chosen, "mpi4py" if ws > 1 else "non_dist")

    shards = {"padded": padded_shard, "uneven": uneven_shard, "cat": contiguous_shard}
    for kind, shard in shards.items():
        feed(auto[kind], shard(rank, ws), scores, labels)
        c.equal(f"auto {kind}: compute(size=N) equals one process", auto[kind].compute(size=N_SAMPLES), expected)
    feed(named, padded_shard(rank, ws), scores, labels)
    c.equal("named 'mpi4py': compute(size=N) equals one process", named.compute(size=N_SAMPLES), expected)
    c.check("compute() is repeatable", named.compute(size=N_SAMPLES) == expected)

    order_unzip.add(padded_shard(rank, ws))
    got = order_unzip.compute(size=N_SAMPLES)
    c.equal("object results in dataset order (unzip, padded)", got["ids"], list(range(N_SAMPLES)))
    c.check("object results intact", got["tags_ok"])
    order_cat.add(contiguous_shard(rank, ws))
    c.equal("object results in dataset order (cat)", order_cat.compute()["ids"], list(range(N_SAMPLES)))

    c.equal("MPI imported only for a distributed run", "mpi4py.MPI" in sys.modules, ws > 1)
    backend = named.dist_comm
    c.equal("backend instance", type(backend).__name__, "MPI4PyDist")
    c.equal("backend world size", backend.world_size, ws)
    c.equal("backend rank", backend.rank, rank)

    # The tutorial's flow: the script imports MPI itself (MPI_Init), then evaluates.
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    c.equal("COMM_WORLD size", world.Get_size(), ws)
    tutorial = mmeval.Accuracy(topk=(1, 3), dist_backend="mpi4py")
    feed(tutorial, padded_shard(world.Get_rank(), world.Get_size()), scores, labels)
    c.equal("tutorial flow", tutorial.compute(size=N_SAMPLES), expected)

    # A Split communicator as the evaluation group: each half evaluates the whole dataset.
    from mmeval_mpi4py import MPI4PyDist

    color = rank % 2
    sub = world.Split(color, key=rank)
    group = MPI4PyDist(sub)
    grouped = mmeval.Accuracy(topk=(1, 3), dist_backend=group)
    feed(grouped, padded_shard(group.rank, group.world_size), scores, labels)
    c.equal("split group: compute(size=N) equals one process", grouped.compute(size=N_SAMPLES), expected)
    c.equal("split group size", group.world_size, len(range(color, ws, 2)))
    sub.Free()
    report(rank, c, world_size=ws)


if __name__ == "__main__":
    main()
