"""``is_filepath`` of MMEval 0.2.1's ``mmeval.utils.path``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["is_filepath"]


def is_filepath(x: Any) -> bool:
    """True if ``x`` is a ``str`` or a :class:`pathlib.Path` (MMEval's test; other ``os.PathLike`` are not)."""
    return isinstance(x, (str, Path))
