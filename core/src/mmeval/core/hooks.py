"""Events around every collective, through pluggy hooks: the public names in one place.

The hook specs and the event are in :mod:`.hook_specs`, the manager (discovery
through the entry-point group ``mmeval.hooks``, :func:`register_hooks`,
emission, all on the one instance ``HOOKS``) in :mod:`.hook_manager`, the communication-stats reporter
(``MMEVAL_COMM_STATS=1``) in :mod:`.comm_stats`.
"""

from __future__ import annotations

from .comm_stats import CommStats, enable_comm_stats, get_comm_stats
from .hook_manager import HOOKS, emit, emit_start, hooks_active, register_hooks, unregister_hooks
from .hook_specs import HOOK_GROUP, PROJECT, CollectiveEvent, HookSpecs, hookimpl

#: Look for hook implementations now (a test's fresh process decides after setting its environment).
_decide = HOOKS.decide

__all__ = [
    "HOOK_GROUP",
    "PROJECT",
    "CollectiveEvent",
    "CommStats",
    "HookSpecs",
    "hookimpl",
    "register_hooks",
    "unregister_hooks",
    "enable_comm_stats",
    "get_comm_stats",
    "emit",
    "emit_start",
    "hooks_active",
]
