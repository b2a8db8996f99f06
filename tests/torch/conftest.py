"""Fixtures of the torch backend tests: groups of real processes, shared across tests.

``ranks`` is a session-scoped group of spawned processes per (backend kind,
world size); pytest runs every test of one parameter before it starts the
next, so one group is alive at a time. ``torch_cuda`` parameters are skipped,
with the reason, where this machine has no (or too few) CUDA devices.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterator

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # the spawned workers import _torch_workers by name: they inherit sys.path
    sys.path.insert(0, HERE)

pytest.importorskip("torch")

from _torch_groups import GroupHandle, group_params  # noqa: E402


@pytest.fixture(scope="session", params=group_params())
def ranks(request: Any) -> Iterator[GroupHandle]:
    """A group of spawned ranks of one (kind, world size), shared by the tests that use it."""
    kind, ws = request.param
    handle = GroupHandle(kind, ws)
    yield handle
    handle.close()
