"""Every metric of the catalogue: what its ``compute()`` sends and how long it takes, at two dataset sizes.

The metrics and their data are the shared test table's (``tests/metric_cases.py`` and every
``tests/metric_cases_<area>.py``: each case one metric with its arguments and about 40 to 120 samples).
Per case, in one process group, every rank adds its round-robin shard of a dataset of ``n`` samples
and of ``4 n`` (the case's samples repeated: sample ``j`` is sample ``j % n``), then ``compute(size=...)``:

* bytes this rank sends during ``compute()`` (the comm-stats hook), at ``n`` and ``4 n``: a state
  metric's are the same at both sizes (its reduced statistics), a per-sample metric's grow with ``n``;
* ``compute()``'s time, the slowest rank's, median over ``--iters`` (data added again before each);
* the kind: ``state`` (declared statistics, reduced) or ``per-sample`` (gathered to rank 0).

A metric that refuses repeated samples (``AVAMeanAP``: a frame added twice) is measured at ``n`` only.
Needs scikit-learn and the core's extras (the table's data and the field-library metrics).

Run::

    python benchmarks/catalogue.py --backend torch_cpu --world-size 2 --out /tmp/catalogue.json
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import pickle
import sys
import tempfile
import time
import warnings
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common
from compute import Comm, launch

TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
#: dataset sizes measured, as multiples of each case's own ``n``
SCALES = (1, 4)


def _cases(path: str) -> Dict[str, Dict[str, Any]]:
    with open(path, "rb") as f:
        return pickle.load(f)  # type: ignore[no-any-return]


def _measure(
    comm: Comm,
    backend: str,
    case: Dict[str, Any],
    scale: int,
    iters: int,
    prepare: Optional[Callable[[Any], None]] = None,
) -> Dict[str, Any]:
    """Bytes sent and compute() time of one case at ``scale`` times its samples, on this rank (``prepare(metric)``,
    when given, runs on each metric once its samples are added)."""
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)
    import metric_cases
    from metrics import _sent_during

    cls = metric_cases.metric_class(case["metric"])
    n = case["n"] * scale
    mine = [j % case["n"] for j in range(comm.rank, n, comm.ws)]

    def fed() -> Any:
        metric = cls(**case["kwargs"], dist_backend=backend)
        metric_cases.feed(metric, case["inputs"], mine)
        if prepare is not None:
            prepare(metric)
        return metric

    metric = fed()
    kind = "state" if getattr(metric, "_state_specs", None) else "per-sample"
    comm.barrier()
    _, sent, calls = _sent_during(metric.compute, size=n)
    times = []
    for it in range(iters + 1):
        metric = fed()
        gc.collect()
        comm.barrier()
        t0 = time.perf_counter()
        metric.compute(size=n)
        dt = comm.max(time.perf_counter() - t0)
        if it:  # the first round warms up
            times.append(dt)
    return {
        "kind": kind,
        "samples": n,
        "sent_bytes_per_rank": comm.gather_floats(float(sent)),
        "collectives": calls,
        "compute_s": common.median(times),
    }


def run_rank(comm: Comm, args: argparse.Namespace, backend: str) -> List[Dict[str, Any]]:
    warnings.simplefilter("ignore")
    logging.getLogger("mmeval").setLevel(logging.ERROR)  # the repeated samples' warnings (4n: each sample 4 times)
    records: List[Dict[str, Any]] = []
    for name, case in _cases(args.payload).items():
        rec: Dict[str, Any] = {
            "kind": "catalogue",
            "case": name,
            "metric": case["metric"].split(":")[1],
            "backend": backend,
            "ws": comm.ws,
            "n": case["n"],
        }
        for scale in SCALES:
            try:
                got = _measure(comm, backend, case, scale, args.iters)
            except Exception as exc:  # every rank raises alike (the promises): record it, go on
                rec[f"x{scale}"] = {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
                continue
            rec["metric_kind"] = got.pop("kind")
            rec[f"x{scale}"] = got
        records.append(rec)
        if comm.rank == 0:
            row = {
                k: (v.get("sent_bytes_per_rank"), v.get("compute_s")) if "error" not in v else v["error"]
                for k, v in rec.items()
                if k.startswith("x")
            }
            print(f"  {name} {backend} ws={comm.ws}: {rec.get('metric_kind')} {row}", flush=True)
    return records


def cases_parser(doc: str, iters: int) -> argparse.ArgumentParser:
    """The options of a script that measures cases of the table on ranks (this one, ``exact_sums.py``)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--backend", choices=("torch_cpu", "mpi4py"), default="torch_cpu")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--iters", type=int, default=iters)
    parser.add_argument("--payload", default=None, help="the cases, pickled (built here when not given)")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--out", default=None)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = cases_parser(__doc__, 3).parse_args(argv)
    return launch_with_cases(__file__, args, argv, run_rank, _all_cases)


def _all_cases() -> Dict[str, Dict[str, Any]]:
    sys.path.insert(0, TESTS)
    import metric_cases

    return metric_cases.all_cases()  # type: ignore[no-any-return]


def launch_with_cases(
    script: str,
    args: argparse.Namespace,
    argv: Optional[List[str]],
    work: Any,
    cases: Callable[[], Dict[str, Dict[str, Any]]],
) -> int:
    """:func:`compute.launch` of ``work``, the ranks reading ``args.payload``: when not given, ``cases()``
    pickled here once (scikit-learn needed here only) and passed on as ``--payload``."""
    if args.payload is not None:
        return launch(script, args, argv, work)
    fd, args.payload = tempfile.mkstemp(prefix="mmeval-cases-", suffix=".pkl")
    with os.fdopen(fd, "wb") as f:
        pickle.dump(cases(), f, protocol=pickle.HIGHEST_PROTOCOL)
    argv = [*(argv if argv is not None else sys.argv[1:]), "--payload", args.payload]
    try:
        return launch(script, args, argv, work)
    finally:
        os.unlink(args.payload)


if __name__ == "__main__":
    sys.exit(main())
