"""What exact float sums cost (issue 32 item 6): each float-state metric of the catalogue, its sums as shipped
(``exact_sum``: the same bits at any world size) and the same metric with them declared plain float64 ``sum``
(as before), side by side in one process group.

Per case of the shared test table whose metric declares an ``exact_sum`` statistic, both variants, at ``n``
and ``4 n`` samples (``catalogue.py``'s measurement: each rank adds its round-robin shard, then
``compute(size=...)``): the bytes this rank sends during ``compute()`` (the comm-stats hook: the state
message) and ``compute()``'s time (the slowest rank's, median over ``--iters``). The plain variant is the
same metric, fed the same way, whose ``exact_sum`` specs are re-declared ``sum`` before ``compute()``.

Run (``python benchmarks/run.py --parts exactsum`` runs this)::

    python benchmarks/exact_sums.py --backend torch_cpu --world-size 2 --out /tmp/exact_sums.json
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import warnings
from typing import Any, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from catalogue import SCALES, TESTS, _cases, _measure, cases_parser, launch_with_cases
from compute import Comm

VARIANTS = ("plain", "exact")


def plain(metric: Any) -> None:
    """Re-declare ``metric``'s ``exact_sum`` statistics as plain float64 sums (the state before exact sums)."""
    metric._state_specs = [
        dataclasses.replace(s, reduction="sum") if s.reduction == "exact_sum" else s for s in metric._state_specs
    ]


def run_rank(comm: Comm, args: argparse.Namespace, backend: str) -> List[Dict[str, Any]]:
    warnings.simplefilter("ignore")
    logging.getLogger("mmeval").setLevel(logging.ERROR)
    records: List[Dict[str, Any]] = []
    for name, case in _cases(args.payload).items():
        rec: Dict[str, Any] = {"kind": "exactsum", "case": name, "backend": backend, "ws": comm.ws, "n": case["n"]}
        for variant in VARIANTS:
            for scale in SCALES:
                got = _measure(comm, backend, case, scale, args.iters, plain if variant == "plain" else None)
                rec[f"{variant}_x{scale}"] = {k: got[k] for k in ("sent_bytes_per_rank", "compute_s", "collectives")}
        records.append(rec)
        if comm.rank == 0:
            row = {
                k: (v["sent_bytes_per_rank"][0], round(v["compute_s"] * 1e3, 3)) for k, v in rec.items() if "_x" in k
            }
            print(f"  {name} {backend} ws={comm.ws} (bytes sent, compute ms): {row}", flush=True)
    return records


def float_state_cases() -> Dict[str, Dict[str, Any]]:
    """The table's cases whose metric declares an ``exact_sum`` statistic (parent side: needs scikit-learn)."""
    sys.path.insert(0, TESTS)
    import metric_cases

    out = {}
    for name, case in metric_cases.all_cases().items():
        metric = metric_cases.metric_class(case["metric"])(**case["kwargs"], dist_backend="non_dist")
        metric_cases.feed(metric, case["inputs"], range(min(case["n"], 3)))
        if any(s.reduction == "exact_sum" for s in metric._state_specs):
            out[name] = case
    return out


def main(argv: Optional[List[str]] = None) -> int:
    args = cases_parser(__doc__, 5).parse_args(argv)
    return launch_with_cases(__file__, args, argv, run_rank, float_state_cases)


if __name__ == "__main__":
    sys.exit(main())
