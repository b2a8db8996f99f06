"""One rank of test_horovod_backends.py::test_a_removed_process_sets_id_reused_starts_clean.

    horovodrun -np 3 --gloo ... python hvd_recycle_program.py torch|tensorflow OUT_DIR

Horovod hands a removed process set's id to the next one it adds. Ranks 0 and N-1 form a process
set; rank 0 alone calls a collective there, times out, and the set is poisoned; every rank removes it
and adds a new set of the same ranks (Horovod gives it the same id). A backend over the new set
must start clean: its first collective works. Each rank writes ``OUT_DIR/rank<R>.json``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any, Dict

FLAVOUR, OUT_DIR = sys.argv[1], sys.argv[2]

if FLAVOUR == "torch":
    import horovod.torch as hvd

    from mmeval_horovod import TorchHorovodDist as Backend
else:
    import horovod.tensorflow as hvd

    from mmeval_horovod import TFHorovodDist as Backend

from mmeval.core.errors import CollectiveTimeoutError, GroupPoisonedError  # noqa: E402

hvd.init(process_sets="dynamic")
RANK = hvd.rank()
MEMBERS = [0, hvd.size() - 1]
report: Dict[str, Any] = {}
try:
    first = hvd.add_process_set(MEMBERS)
    report["first_id"] = first.process_set_id
    if RANK == 0:  # alone in a collective of the set: times out, and the set is poisoned
        b = Backend(first, timeout=2.0)
        try:
            b.all_gather_object("alone")
        except CollectiveTimeoutError:
            report["timed_out"] = True
        try:
            b.barrier()
        except GroupPoisonedError:
            report["poisoned"] = True
    hvd.remove_process_set(first)
    second = hvd.add_process_set(MEMBERS)
    report["second_id"] = second.process_set_id
    if RANK in MEMBERS:
        report["gathered"] = Backend(second, timeout=60.0).all_gather_object(RANK)
except Exception:  # recorded for the test to show
    report["error"] = traceback.format_exc()[-3000:]
with open(os.path.join(OUT_DIR, f"rank{RANK}.json.tmp"), "w") as f:
    json.dump(report, f)
os.replace(os.path.join(OUT_DIR, f"rank{RANK}.json.tmp"), os.path.join(OUT_DIR, f"rank{RANK}.json"))
# leave together (a rank that exits first shuts Horovod down under the others): wait for every report
deadline = time.monotonic() + 120
while time.monotonic() < deadline and not all(
    os.path.exists(os.path.join(OUT_DIR, f"rank{r}.json")) for r in range(hvd.size())
):
    time.sleep(0.05)
