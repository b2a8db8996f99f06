"""Entry-point access: the standard library on Python >= 3.10, the backport before.

Python 3.9's ``importlib.metadata.entry_points()`` has no ``group=`` selection
and does not deduplicate a distribution found twice on ``sys.path``; the
``importlib-metadata`` backport does both.
"""

from __future__ import annotations

import sys
from typing import Any, List

if sys.version_info >= (3, 10):
    import importlib.metadata as importlib_metadata
else:  # pragma: no cover - exercised by the py39 env
    import importlib_metadata

__all__ = ["importlib_metadata", "entry_points_in_group", "distribution_of"]


def entry_points_in_group(group: str) -> List[Any]:
    """The entry points of ``group`` from every installed distribution (one per distribution)."""
    return list(importlib_metadata.entry_points(group=group))


def distribution_of(ep: Any) -> Any:
    """The distribution an entry point came from, or ``None`` if unknown."""
    return getattr(ep, "dist", None)
