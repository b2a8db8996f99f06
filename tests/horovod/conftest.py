"""Fixtures of the Horovod tests: the multi-host namespaces (tests/multihost/hostfixtures.py), for horovodrun across hosts."""

from __future__ import annotations

import os
import sys

MULTIHOST = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "multihost")
if MULTIHOST not in sys.path:
    sys.path.insert(0, MULTIHOST)

from hostfixtures import _remove_leaked_shm, figures, pytest_terminal_summary, scratch, two_hosts  # noqa: E402,F401
