"""The one settings reader and the one logger of the core.

A setting is read from the environment in one order everywhere: the explicit
value, else ``MMEVAL_<BACKEND>_<KEY>``, else ``MMEVAL_<KEY>``
(:func:`setting_from_env`, :func:`resolve_setting`, :func:`read_setting` with a
parser such as :func:`flag`); a process-wide switch such as
``MMEVAL_COMM_STATS`` is read with :func:`env_flag`. Everything the core logs
goes to :func:`logger`, the ``mmeval`` logger (:mod:`logging` is imported
when something is first logged, not to list backends).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Optional, Tuple, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    import logging

__all__ = [
    "logger",
    "env_flag",
    "setting_from_env",
    "resolve_setting",
    "read_setting",
    "choice",
    "flag",
    "mebibytes",
]

_T = TypeVar("_T")

#: The name of the one logger the core (and the in-tree plugins) log to.
LOGGER_NAME = "mmeval"


def logger() -> "logging.Logger":
    """The ``mmeval`` logger (MMEval 0.2.1's ``mmeval.utils.logging.DEFAULT_LOGGER``)."""
    import logging

    return logging.getLogger(LOGGER_NAME)


def env_flag(var: str) -> bool:
    """Whether the environment variable ``var`` is set to something other than empty, ``0``, ``false`` or ``no``."""
    return os.environ.get(var, "").strip().lower() not in ("", "0", "false", "no")


def setting_from_env(backend: str, key: str) -> Optional[Tuple[str, str]]:
    """``(variable, text)`` of the first non-empty of ``MMEVAL_<BACKEND>_<KEY>`` and ``MMEVAL_<KEY>``, else ``None``.

    The one place the order of a backend setting's environment variables is
    decided (timeouts, codecs, the plugins' own settings).
    """
    for var in (f"MMEVAL_{backend.upper()}_{key}", f"MMEVAL_{key}"):
        text = os.environ.get(var)
        if text:
            return var, text
    return None


def resolve_setting(backend: str, key: str, value: Optional[str]) -> Optional[str]:
    """A backend setting: the explicit value, else ``MMEVAL_<BACKEND>_<KEY>``, else ``MMEVAL_<KEY>``."""
    if value is not None:
        return value
    found = setting_from_env(backend, key)
    return found[1] if found is not None else None


def read_setting(backend: str, key: str, parse: Callable[[str], _T], default: _T, expected: str) -> _T:
    """The backend setting ``key`` from ``MMEVAL_<BACKEND>_<KEY>``, else ``MMEVAL_<KEY>``, else ``default``.

    ``parse`` turns the text into the value and raises ``ValueError`` on bad
    text; the error then names the variable, its value and ``expected``.
    """
    found = setting_from_env(backend, key)
    if found is None:
        return default
    var, raw = found
    try:
        return parse(raw.strip())
    except ValueError:
        raise ValueError(f"{backend}: {var}={raw!r} is not {expected}") from None


def choice(*options: str) -> Callable[[str], str]:
    """A ``parse`` for :func:`read_setting` that accepts one of ``options`` (case-insensitive)."""

    def parse(text: str) -> str:
        if text.lower() not in options:
            raise ValueError(text)
        return text.lower()

    return parse


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def flag(text: str) -> bool:
    """A ``parse`` for :func:`read_setting`: ``1/true/yes/on`` or ``0/false/no/off``."""
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ValueError(text)


def mebibytes(text: str) -> int:
    """A ``parse`` for :func:`read_setting`: a number of MiB (``0``: none), as bytes."""
    value = float(text)
    if not value >= 0:  # also NaN
        raise ValueError(text)
    return int(value * 2**20)
