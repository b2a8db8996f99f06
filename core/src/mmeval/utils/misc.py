"""``try_import`` and the sequence checks of MMEval 0.2.1's ``mmeval.utils.misc``."""

from __future__ import annotations

import importlib
from collections import abc
from types import ModuleType
from typing import Any, Optional, Tuple, Union, cast

__all__ = ["try_import", "has_method", "is_seq_of", "is_list_of", "is_tuple_of"]

_Types = Union[type, Tuple[type, ...]]


def try_import(name: str, package: Optional[str] = None) -> Optional[ModuleType]:
    """Import the module ``name`` and return it, or ``None`` if it cannot be imported.

    ``name`` is absolute (``'torch.distributed'``) or, with ``package`` given,
    relative (``'..mod'``), as for :func:`importlib.import_module`. Any
    ``ImportError`` (the module or one of its own imports is missing) gives
    ``None``; other exceptions raised by the module's code propagate, since
    they are bugs to see, not a missing install.
    """
    try:
        return importlib.import_module(name, package)
    except ImportError:
        return None


def has_method(obj: object, method: str) -> bool:
    """True if ``obj`` has an attribute ``method`` that is callable."""
    return callable(getattr(obj, method, None))


def is_seq_of(seq: Any, expected_type: _Types, seq_type: Optional[type] = None) -> bool:
    """True if ``seq`` is a ``seq_type`` (default: any ``Sequence``) whose items are all ``expected_type``.

    An empty sequence of the right type is true. ``seq_type``, when given,
    must be a type (``TypeError`` otherwise).
    """
    if seq_type is not None and not isinstance(seq_type, type):
        raise TypeError(f"is_seq_of: seq_type must be a type such as list or tuple, got {seq_type!r}")
    container: type = abc.Sequence if seq_type is None else seq_type
    if not isinstance(seq, container):
        return False
    return all(isinstance(item, expected_type) for item in cast("abc.Iterable[Any]", seq))


def is_list_of(seq: Any, expected_type: _Types) -> bool:
    """True if ``seq`` is a ``list`` whose items are all ``expected_type``."""
    return is_seq_of(seq, expected_type, seq_type=list)


def is_tuple_of(seq: Any, expected_type: _Types) -> bool:
    """True if ``seq`` is a ``tuple`` whose items are all ``expected_type``."""
    return is_seq_of(seq, expected_type, seq_type=tuple)
