"""Every case of the shared metric table, at world sizes 1-4 under every sharding, compared bit for bit with
one process (issue 32 item 6); writes the docs table.

Usage (from the repository root, with the core and scikit-learn installed)::

    python tools/bitwise_table.py                      # print the table (markdown)
    python tools/bitwise_table.py --write docs/bitwise.md --json out.json
    python tools/bitwise_table.py --world-sizes 2 3 --cases MeanSquaredError Perplexity
    python tools/bitwise_table.py --from-json out.json --write docs/bitwise.md   # the table of an earlier run

Each world size runs as real processes over the in-tree test backend (tests/core/hub_backend.py, a
TCP hub), one launch per world size running every case. The reference is one process
(``dist_backend="non_dist"``) given every sample in dataset order, batches of
``metric_cases.BATCH``. Shardings: ``padded``, ``uneven``, ``cat``, ``indices`` (those of
tests/metric_cases.py: padded ``DistributedSampler`` with ``compute(size=n)``, uneven round robin,
contiguous blocks, shuffled with duplicates through ``add(..., indices=)``) and ``shuffled``
(``DistributedSampler(shuffle=True)``: a seeded permutation padded by wrapping, dealt round robin,
``compute(size=n)``). A result is *bit-identical* when every float in it has the same bits
(``float64`` or the result's own dtype) and everything else is equal; otherwise the cell names the
shardings that differ and the largest distance in units in the last place (ulp).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import sys
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _p in (os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "core")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import metric_cases  # noqa: E402

SHARDINGS = metric_cases.SHARDINGS + ("shuffled",)
WORLD_SIZES = (1, 2, 3, 4)


def _ulps(a: float, b: float) -> float:
    """Distance of two float64s in units in the last place (inf when one is NaN and the other not)."""
    if math.isnan(a) or math.isnan(b):
        return 0.0 if math.isnan(a) and math.isnan(b) else math.inf

    def key(x: float) -> int:
        i: int = struct.unpack("<q", struct.pack("<d", x))[0]
        return i if i >= 0 else -(i & 0x7FFFFFFFFFFFFFFF)

    return float(abs(key(a) - key(b)))


def bit_distance(got: Any, want: Any) -> float:
    """0 when ``got`` and ``want`` are the same to the bit (through dicts, lists, tuples and arrays); else the
    largest float distance in ulp, or ``inf`` when they differ otherwise (keys, lengths, dtypes, integers)."""
    if isinstance(want, dict):
        if not isinstance(got, dict) or list(got) != list(want):
            return math.inf
        return max([bit_distance(got[k], want[k]) for k in want], default=0.0)
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            return math.inf
        return max([bit_distance(g, w) for g, w in zip(got, want)], default=0.0)
    if isinstance(want, str) or isinstance(got, str):
        return 0.0 if got == want else math.inf
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape or g.dtype != w.dtype:
        return math.inf
    if w.dtype.kind != "f":
        return 0.0 if np.array_equal(g, w) else math.inf
    if g.tobytes() == w.tobytes():
        return 0.0
    pairs = zip(g.astype(np.float64).ravel().tolist(), w.astype(np.float64).ravel().tolist())
    return max(max((_ulps(a, b) for a, b in pairs), default=0.0), 0.5)  # same value, other bits (-0.0): 0.5


def shuffled_order(n: int, ws: int, seed: int = 32) -> List[int]:
    """``DistributedSampler(shuffle=True)``'s order: a seeded permutation, padded by wrapping to a multiple of ws."""
    order = [int(i) for i in np.random.default_rng(seed + ws).permutation(n)]
    return order + order[: -n % ws]


def rank_body(backend: Any, payload: Dict[str, Dict[str, Any]]) -> Dict[str, float]:
    """Every case under every sharding on this rank: ``{"case/sharding": bit distance}`` (-1: raised)."""
    warnings.simplefilter("ignore")  # the uneven shardings' ShardingWarning, on purpose here
    out: Dict[str, float] = {}
    for name, case in payload.items():
        cls = metric_cases.metric_class(case["metric"])

        def make(_cls: Any = cls, _kw: Dict[str, Any] = case["kwargs"], **kwargs: Any) -> Any:
            return _cls(**_kw, **kwargs)

        inputs, n = case["inputs"], case["n"]
        try:
            results = metric_cases.shard_results(backend, make, inputs, n)
            metric = make(dist_backend=backend)
            order = shuffled_order(n, backend.world_size)
            metric_cases.feed(metric, inputs, order[backend.rank :: backend.world_size])
            results["shuffled"] = metric.compute(size=n)
        except Exception:  # the table says "raised"
            out.update({f"{name}/{s}": -1.0 for s in SHARDINGS})
            continue
        for sharding in SHARDINGS:
            out[f"{name}/{sharding}"] = bit_distance(results[sharding], case["want"])
    return out


def run_world(world_size: int, payload: Dict[str, Dict[str, Any]], timeout: float) -> Dict[str, float]:
    """Every rank's distances at ``world_size``, the largest over the ranks for each case and sharding."""
    from hub_backend import run_ranks

    out = run_ranks(rank_body, world_size, payload, timeout=timeout)
    merged: Dict[str, float] = {}
    for rank in range(world_size):
        status, value = out[rank]
        if status != "ok":
            raise RuntimeError(f"world size {world_size}, rank {rank}: {value}")
        for key, d in value.items():
            merged[key] = -1.0 if d < 0 or merged.get(key, 0.0) < 0 else max(merged.get(key, 0.0), d)
    return merged


def cell(distances: Dict[str, float], case: str) -> str:
    """One table cell: ``same`` or the shardings that differ, with their largest distance."""
    parts = []
    for s in SHARDINGS:
        d = distances[f"{case}/{s}"]
        if d < 0:
            parts.append(f"{s}: raised")
        elif math.isinf(d):
            parts.append(f"{s}: differs")
        elif d:
            parts.append(f"{s}: {d:.3g} ulp")
    return "same" if not parts else ", ".join(parts)


def table(by_ws: Dict[int, Dict[str, float]], cases: Sequence[str]) -> Tuple[str, int, int]:
    """The markdown table, the number of (case, world size, sharding) runs and how many are bit-identical."""
    sizes = sorted(by_ws)
    lines = ["| case | " + " | ".join(f"{ws} rank{'s' if ws > 1 else ''}" for ws in sizes) + " |"]
    lines.append("| --- |" + " --- |" * len(sizes))
    total = same = 0
    for case in cases:
        lines.append(f"| {case} | " + " | ".join(cell(by_ws[ws], case) for ws in sizes) + " |")
        for ws in sizes:
            for s in SHARDINGS:
                total += 1
                same += by_ws[ws][f"{case}/{s}"] == 0
    return "\n".join(lines), total, same


HEADER = """# Bit for bit at any world size

Generated by `python tools/bitwise_table.py --write docs/bitwise.md` (do not edit by hand; the cost
table at the end comes from the benchmark suite's `exactsum` part, `--bench-json`). Every case of
the shared metric table (`tests/metric_cases*.py`), run at world sizes 1-4 as real processes (the in-tree
TCP hub backend) under five shardings -- `padded` (`DistributedSampler`, `compute(size=n)`), `uneven`
(round robin, no padding), `cat` (contiguous blocks), `indices` (shuffled, duplicates, `add(...,
indices=)`), `shuffled` (`DistributedSampler(shuffle=True)`, `compute(size=n)`) -- and compared bit for
bit with one process given every sample in dataset order. `same`: all five shardings give the
one-process bits; otherwise the shardings that differ and by how many units in the last place.

Why it holds: a per-sample metric computes on rank 0 over the samples in dataset order, and a state
metric's float sums are declared `exact_sum` (`mmeval.core.exact_sum`): each rank keeps the exact sum
of its rows as integer limbs, the ranks add the limbs with the same integer `all_reduce` as the counts,
and the total is rounded to float64 once -- the correctly rounded sum, whatever the partition or order.
"""

FOOTER = """
Equal scores rank by what the sample is, never by arrival: before, under a
shuffled `DistributedSampler` (`compute(size=n)`, no `indices=`) `VOCMeanAP`, `AVAMeanAP` and
`DOTAMeanAP` ranked equal scores of different samples in arrival order, so their AP followed the
shuffle (one process fed the shuffled order differed too). Now VOC, DOTA and OID rank them by a
64-bit digest of the image's summary (computed where they are ranked: no byte more on the wire),
AVA by the frame's row in `ann_file` (already in its summary), and COCO's images sharing an `img_id`
by their digest (8 bytes an image in each part).

Before exact sums (commit 16645fa): 778 of 900 runs bit-identical. Besides the three above, the 14
cases whose state holds a float64 sum -- `MeanAbsoluteError`, `MeanSquaredError`, PSNR, SNR, SSIM,
SAD, the three matting errors, `EndPointError`, NIQE, both ROUGE cases and `Perplexity` -- differed by
1-3 ulp at 2-4 ranks (and at one rank under another batch order). The keypoint metrics' float64 sums
were exact already (their rows are float32 distances) and are now exact by declaration.

The cost (`python benchmarks/run.py --parts exactsum`, `benchmarks/exact_sums.py`: each float-state
case with its sums exact and re-declared plain float64 sums, side by side in one run, torch_cpu, 2
ranks): an exact sum is 51 int64s (408 bytes) a value instead of 8, and rides in the int64 group of
the counts, so a state of one or two float sums plus counts still fits the one 4 KiB slot, and with
no padding to drop moves in one round where plain float sums took a second and a third (4 KiB sent
per rank instead of 12 KiB; ROUGE's 3 x 3 sums, 3.6 KiB of limbs, spill into a second slot: 7.6 KiB
instead of 12 KiB); where a sampler's padding is dropped, exact sums take a second round as before.
`compute()` is mostly faster (one round instead of three; rounding 46 limbs takes microseconds a
value), except where the limbs spill into a second slot: ROUGE-avg's 9 sums, 1.2-1.8x. `add()`
pays for it: a batch's rows are turned into limbs as they are added -- about 0.1-0.3 ms a batch of a
few rows on the 2-core test machine where a float64 sum takes 0.03 ms, small beside scoring an
image, an optical flow or a sequence.
"""


def cost_table(bench_json: str) -> str:
    """The benchmark suite's exact-sum table (``benchmarks/report_exactsum.py``) from ``bench_json``, if it has one."""
    if not os.path.exists(bench_json):
        return ""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import report_exactsum

    with open(bench_json) as f:
        lines = report_exactsum.exactsum_table(json.load(f))
    if len(lines) <= 2:
        return ""
    return f"\nMeasured by the benchmark suite ({os.path.basename(bench_json)}):\n\n" + "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=list(WORLD_SIZES))
    parser.add_argument("--cases", nargs="+", help="only these cases (default: every case of the table)")
    parser.add_argument("--write", help="write the docs page here")
    parser.add_argument("--json", help="write every distance here")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds one world size may take")
    parser.add_argument("--from-json", help="no runs: the table of an earlier run's --json file")
    parser.add_argument(
        "--bench-json",
        default=os.path.join(ROOT, "docs", "benchmarks.json"),
        help="the benchmark suite's results whose exactsum part (benchmarks/exact_sums.py) gives the cost table",
    )
    args = parser.parse_args(argv)
    names = [c for c in metric_cases.CASE_NAMES if not args.cases or c in args.cases]
    unknown = sorted(set(args.cases or ()) - set(names))
    if unknown:
        parser.error(f"unknown cases {unknown}; the table has {list(metric_cases.CASE_NAMES)}")
    by_ws: Dict[int, Dict[str, float]] = {}
    if args.from_json:
        with open(args.from_json) as f:
            by_ws = {int(ws): d for ws, d in json.load(f).items()}
    else:
        payload = {k: v for k, v in metric_cases.build_payload().items() if k in names}
        for ws in args.world_sizes:
            t0 = time.perf_counter()
            by_ws[ws] = run_world(ws, payload, args.timeout)
            print(f"world size {ws}: {time.perf_counter() - t0:.0f}s", file=sys.stderr)
    text, total, same = table(by_ws, names)
    summary = f"{same} of {total} runs bit-identical ({len(names)} cases x {len(by_ws)} world sizes"
    summary += f" x {len(SHARDINGS)} shardings)."
    print(text + "\n\n" + summary)
    if args.write:
        with open(args.write, "w") as f:
            f.write(HEADER + "\n" + text + "\n\n" + summary + "\n" + FOOTER + cost_table(args.bench_json))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({str(ws): d for ws, d in by_ws.items()}, f, indent=1, sort_keys=True)
    return 0 if same == total else 1


if __name__ == "__main__":
    sys.exit(main())
