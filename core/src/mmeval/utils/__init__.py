"""Helpers MMEval 0.2.1 exposed as ``mmeval.utils``, for code written against it.

``try_import`` returns a module or ``None``; ``is_seq_of`` / ``is_list_of`` /
``is_tuple_of`` / ``has_method`` / ``is_filepath`` are type checks;
``DEFAULT_LOGGER`` is the ``mmeval`` logger. The submodules ``misc``, ``path``
and ``logging`` exist under the same paths as in MMEval.
"""

from __future__ import annotations

from .logging import DEFAULT_LOGGER
from .misc import has_method, is_list_of, is_seq_of, is_tuple_of, try_import
from .path import is_filepath

__all__ = [
    "try_import",
    "has_method",
    "is_seq_of",
    "is_list_of",
    "is_tuple_of",
    "is_filepath",
    "DEFAULT_LOGGER",
]
