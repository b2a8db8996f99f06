"""Codecs in one process: mmeval's ``pickle`` and ``safe`` codecs vs plain ``pickle.dumps``/``loads``.

For every payload of the suite: the time to encode it into a frame
(``encode`` + ``write_into`` a buffer, as a backend does) and to decode the
frame, with each codec, interleaved and repeated; medians. The ``safe`` codec
(plain data only, issue 6) is the one to use between ranks that do not trust
each other; this is its price. The yardstick is plain pickle (protocol 5,
in-band), what a pickle-based object collective does.

Run::

    python benchmarks/codec.py [--out /tmp/codec.json]
"""

from __future__ import annotations

import argparse
import gc
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common
from common import PAYLOADS

REPS = {"dict1k": 400, "arr1m": 60, "arr16m": 15, "arr64m": 7, "arr256m": 3, "tuples100k": 7}


def _round_trip(codec: str) -> Callable[[Any], Dict[str, float]]:
    from mmeval.core.serialization import decode, encode

    def run(payload: Any) -> Dict[str, float]:
        t0 = time.perf_counter()
        frame = encode(payload, codec)
        buf = bytearray(frame.nbytes)
        frame.write_into(memoryview(buf))
        t1 = time.perf_counter()
        out = decode(buf, codec)
        t2 = time.perf_counter()
        del out
        return {"encode": t1 - t0, "decode": t2 - t1, "bytes": float(frame.nbytes)}

    return run


def _plain(payload: Any) -> Dict[str, float]:
    t0 = time.perf_counter()
    blob = pickle.dumps(payload, protocol=5)
    t1 = time.perf_counter()
    out = pickle.loads(blob)
    t2 = time.perf_counter()
    del out
    return {"encode": t1 - t0, "decode": t2 - t1, "bytes": float(len(blob))}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payloads", nargs="+", default=list(PAYLOADS), choices=PAYLOADS)
    parser.add_argument("--reps-scale", type=float, default=1.0)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    os.environ.update(common.MALLOC_PIN)
    methods = {"pickle codec": _round_trip("pickle"), "safe codec": _round_trip("safe"), "plain pickle": _plain}
    records: List[Dict[str, Any]] = []
    for name in args.payloads:
        payload = common.make_payload(name, 0)
        runs: Dict[str, List[Dict[str, float]]] = {m: [] for m in methods}
        reps = max(2, int(REPS[name] * args.reps_scale))
        names = list(methods)
        for rep in range(reps + 1):
            k = rep % len(names)
            for m in names[k:] + names[:k]:
                result = methods[m](payload)
                if rep:
                    runs[m].append(result)
            gc.collect()
        line = []
        for m, results in runs.items():
            enc = common.median([r["encode"] for r in results])
            dec = common.median([r["decode"] for r in results])
            records.append(
                {
                    "kind": "codec",
                    "payload": name,
                    "method": m,
                    "encode_s": enc,
                    "decode_s": dec,
                    "bytes": int(results[0]["bytes"]),
                    "reps": len(results),
                }
            )
            line.append(f"{m}: {enc * 1e3:.2f}+{dec * 1e3:.2f}ms")
        print(f"  codec {name:10s} " + "  ".join(line), flush=True)
        del payload
    if args.out:
        common.write_json(Path(args.out), {"meta": {}, "records": records})
    return 0


if __name__ == "__main__":
    sys.exit(main())
