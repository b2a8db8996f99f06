"""``DEFAULT_LOGGER`` of MMEval 0.2.1's ``mmeval.utils.logging``: the ``mmeval`` logger.

It is the logger the core logs to (auto-selection, warnings). Unlike MMEval,
importing this module configures nothing: no level is set and no handler is
added, so the application's ``logging`` configuration decides what is shown.
"""

from __future__ import annotations

import logging

__all__ = ["DEFAULT_LOGGER"]

DEFAULT_LOGGER: logging.Logger = logging.getLogger("mmeval")
