"""Former home of the sample-selection helpers: they live in :mod:`mmeval.core.sync.ordering` and
:mod:`mmeval.core.inputs` now; the names stay importable from here."""

from __future__ import annotations

from .errors import ShardingWarning
from .inputs import as_indices
from .sync.ordering import check_layout, kept_by_size, kept_count, warn_sharding

__all__ = ["ShardingWarning", "as_indices", "check_layout", "kept_by_size", "kept_count", "warn_sharding"]
