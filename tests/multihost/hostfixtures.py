"""The namespace fixtures as an importable module: the reliability campaign's (namespaces, scratch, figures).

``tests/multihost/conftest.py`` and ``tests/horovod/conftest.py`` take their
fixtures from here, so both suites build their two hosts the same way
(``tests/reliability/netns.py``). Importing this module puts
``tests/reliability`` and ``tests/multihost`` on ``sys.path`` (``netns``,
``reliability_harness``, ``rank_main``, ``launchers`` become importable) and
loads the reliability conftest once, as ``reliability_conftest``.
"""

from __future__ import annotations

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RELIABILITY = os.path.join(os.path.dirname(HERE), "reliability")
for _path in (HERE, RELIABILITY):
    if _path not in sys.path:
        sys.path.insert(0, _path)

_rel = sys.modules.get("reliability_conftest")
if _rel is None:
    _spec = importlib.util.spec_from_file_location("reliability_conftest", os.path.join(RELIABILITY, "conftest.py"))
    assert _spec is not None and _spec.loader is not None
    _rel = importlib.util.module_from_spec(_spec)
    sys.modules["reliability_conftest"] = _rel
    _spec.loader.exec_module(_rel)

figures = _rel.figures
scratch = _rel.scratch
two_hosts = _rel.two_hosts
torch_available = _rel.torch_available
mpi_available = _rel.mpi_available
pytest_terminal_summary = _rel.pytest_terminal_summary
_remove_leaked_shm = _rel._remove_leaked_shm
