"""One rank of test_horovod_rank0_memory.py: rank 0's peak memory in the process's first per-sample compute().

    horovodrun -np 3 --gloo ... python hvd_memory_program.py torch|tensorflow OUT_DIR ROWS

Every rank runs :func:`mmeval.testing.rank0_memory.measure_rank0_memory` over ROWS rows and writes
``OUT_DIR/rank<R>.json`` (what it measured, or ``{"error": traceback}``), then waits at a barrier:
a rank that exits first shuts Horovod down under the others.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any, Dict

FLAVOUR, OUT_DIR, ROWS = sys.argv[1], sys.argv[2], int(sys.argv[3])

if FLAVOUR == "torch":
    import horovod.torch as hvd

    from mmeval_horovod import TorchHorovodDist as Backend
else:
    import horovod.tensorflow as hvd

    from mmeval_horovod import TFHorovodDist as Backend

from mmeval.testing.rank0_memory import measure_rank0_memory  # noqa: E402

hvd.init()
RANK = hvd.rank()
backend = Backend(timeout=120.0)
report: Dict[str, Any]
try:
    report = measure_rank0_memory(backend, ROWS)
except Exception:  # recorded for the test to show
    report = {"error": traceback.format_exc()[-3000:]}
with open(os.path.join(OUT_DIR, f"rank{RANK}.json.tmp"), "w") as f:
    json.dump(report, f)
os.replace(os.path.join(OUT_DIR, f"rank{RANK}.json.tmp"), os.path.join(OUT_DIR, f"rank{RANK}.json"))
if "error" not in report:
    backend.barrier()
