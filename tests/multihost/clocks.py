"""A host whose clocks are set back: a time namespace for CLOCK_MONOTONIC, libfaketime for CLOCK_REALTIME.

A network namespace shares every clock of the machine. The core's deadlines
read two: each rank's own timeout runs on ``time.monotonic()``
(``transport.Call.deadline``), and every slot header carries the sender's
call window as ``time.time()`` (``Call.wall_start``, ``Call.wall_deadline``),
which every rank compares with the other ranks' windows (``guard.check_windows``,
tolerating ``wire.DEADLINE_SKEW``). So host b is set back on both:

* CLOCK_MONOTONIC and CLOCK_BOOTTIME by a time namespace
  (``unshare --time --monotonic -S --boottime -S --fork``, Linux >= 5.6);
* CLOCK_REALTIME, which no namespace can shift, as Python reads it: a
  ``sitecustomize`` (``clock_behind/``) sets ``time.time()`` back in every
  Python process of host b. Not libfaketime: its 0.9.10 LD_PRELOAD (Debian
  12's ``faketime``) makes Python 3.11's ``time.sleep`` fail with EINVAL
  unless it also fakes CLOCK_MONOTONIC, and then ``threading.Event.wait``
  hangs. torch's C++ code (and torchrun's ``datetime``) keep the true time:
  the rendezvous is not what is under test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Tuple

SITE = Path(__file__).resolve().parent / "clock_behind"


def time_namespace_unavailable() -> Optional[str]:
    """Why ``unshare --time`` cannot run here (``None`` when it can)."""
    if shutil.which("unshare") is None:
        return "util-linux 'unshare' is not installed"
    probe = subprocess.run(
        ["unshare", "--time", "--monotonic", "-1", "--fork", "true"], capture_output=True, text=True, timeout=30
    )
    if probe.returncode != 0:
        return f"no time namespaces here (Linux >= 5.6 with CONFIG_TIME_NS): {probe.stderr.strip()}"
    return None


def monotonic_back(wanted: int) -> int:
    """How far CLOCK_MONOTONIC can be set back (it cannot go below 0): ``wanted``, or less on a young machine."""
    with open("/proc/uptime", encoding="ascii") as f:
        up = int(float(f.read().split()[0]))
    return max(1, min(wanted, up - 10))


def set_back(realtime_s: int, monotonic_s: int) -> Tuple[List[str], Dict[str, str], Dict[str, int]]:
    """A command prefix and variables that run a host's commands with its clocks set back; and by how much."""
    prefix = ["unshare", "--time", "--monotonic", str(-monotonic_s), "--boottime", str(-monotonic_s), "--fork"]
    path = os.pathsep.join(p for p in (str(SITE), os.environ.get("PYTHONPATH", "")) if p)
    env = {"PYTHONPATH": path, "TEST_REALTIME_BACK_S": str(realtime_s)}
    return prefix, env, {"monotonic": monotonic_s, "realtime": realtime_s}
