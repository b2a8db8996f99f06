"""One rank of the Horovod metric tests; launched by test_horovod_metrics.py under horovodrun.

    horovodrun -np N --gloo -H localhost:N --network-interfaces lo \\
        python tests/horovod/hvd_metrics_program.py torch|tensorflow PAYLOAD OUT_DIR

``PAYLOAD`` is the pickle of :func:`metric_cases.write_payload` (each case's data and
single-process result). Every rank runs :func:`metric_cases.run_all` on the flavour's backend
(``torch_horovod`` or ``tf_horovod``) and writes ``OUT_DIR/rank<R>.json``:
``{"rank": R, "world_size": N, "backend": name, "report": {...}}``, or ``{"error": traceback}`` when
the run itself failed.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any, Dict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

FLAVOUR, PAYLOAD, OUT_DIR = sys.argv[1:4]


def main() -> None:
    if FLAVOUR == "torch":
        import horovod.torch as hvd

        from mmeval_horovod import TorchHorovodDist as Backend
    elif FLAVOUR == "tensorflow":
        import horovod.tensorflow as hvd

        from mmeval_horovod import TFHorovodDist as Backend
    else:
        raise SystemExit(f"unknown flavour {FLAVOUR!r}: use torch or tensorflow")
    import metric_cases

    hvd.init()
    out: Dict[str, Any] = {"rank": hvd.rank(), "world_size": hvd.size(), "backend": Backend.name}
    try:
        backend = Backend(timeout=120.0)
        out["report"] = metric_cases.run_all(backend, metric_cases.read_payload(PAYLOAD))
    except BaseException:
        out["error"] = traceback.format_exc()
    with open(os.path.join(OUT_DIR, f"rank{hvd.rank()}.json"), "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
