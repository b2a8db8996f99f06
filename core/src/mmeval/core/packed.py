"""Kept path of the per-sample summaries' byte layout, which lives in :mod:`mmeval.core.wire.packed`.

Metrics (and docs/writing-a-metric.md) import ``pack_arrays``, ``PackedColumns``
and the trit helpers from here; every byte layout is defined in ``wire/``.
"""

from __future__ import annotations

from .wire.packed import *  # noqa: F403  (every name of wire.packed.__all__)
from .wire.packed import __all__ as __all__
