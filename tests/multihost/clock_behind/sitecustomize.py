"""Set this process's ``time.time()`` back by ``$TEST_REALTIME_BACK_S`` seconds (a host whose clock is behind).

On ``PYTHONPATH`` of host b's processes only (``clocks.set_back``). Python's
wall clock is what the core sends as a call window (``Call.wall_start``,
``Call.wall_deadline``), which every rank compares with its peers' windows
(``guard.check_windows``). libfaketime's
LD_PRELOAD would also shift the C++ code's clock, but its 0.9.10 (Debian 12)
breaks Python 3.11's ``time.sleep`` (EINVAL from ``clock_nanosleep``) unless it
also fakes CLOCK_MONOTONIC, and then ``threading.Event.wait`` hangs.
"""

import os
import time

_BACK = float(os.environ.get("TEST_REALTIME_BACK_S", "0") or 0)
if _BACK:
    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() - _BACK  # type: ignore[assignment]
    time.time_ns = lambda: _time_ns() - int(_BACK * 1e9)  # type: ignore[assignment]
