"""Fixtures of the multi-host tests: the reliability campaign's (namespaces, scratch, figures), see hostfixtures.py."""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from hostfixtures import (  # noqa: E402,F401
    _remove_leaked_shm,
    figures,
    mpi_available,
    pytest_terminal_summary,
    scratch,
    torch_available,
    two_hosts,
)
