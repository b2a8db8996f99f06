"""What the question carries for configuration that has no value to compare: callables and files (issue 32, item 1).

Every rank's ``compute()`` asks the same question (:meth:`BaseMetric._question`); a field whose encoding
is the same on two ranks that would answer differently is a silent mix. Two kinds had none:

* a callable (a tokenizer): its identity is where it is defined -- ``module.qualname`` for a function
  or class defined at module level, plus the state of a callable object and the arguments of a
  ``functools.partial``. A lambda, a closure or an object whose state is not plain data has no identity
  another process can compare: :func:`callable_identity` refuses it (at the metric's construction, on
  every rank), naming the argument and what to pass instead.
* a file (an ``ann_file``): by its content, a SHA-256 of its bytes (:func:`file_identity`), so the same
  relative path holding different files on two ranks is a mismatch, not a mix. A metric lists the
  attributes that are files in ``question_files``; :func:`identified` adds their digests.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from typing import Any, Dict, Tuple

import numpy as np

from .errors import MetricArgumentError

__all__ = ["NOT_ASKED", "callable_identity", "file_identity", "identified", "question_of"]

#: A metric's attributes never part of the question the ranks must agree on (see :func:`question_of`).
NOT_ASKED = frozenset(("dataset_meta", "logger", "dist_backend", "dist_collect_mode"))

_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_FILE_DIGESTS: Dict[Tuple[str, int, int], str] = {}
_FILE_LOCK = threading.Lock()


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is data another process can compare: scalars, strings, numpy arrays, containers of them."""
    if depth > 32:
        return False
    if isinstance(value, _PLAIN) or isinstance(value, (np.ndarray, np.generic)):
        return not (isinstance(value, np.ndarray) and value.dtype.hasobject)
    if isinstance(value, (list, tuple, set, frozenset)):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in value.items())
    return False


def _where_defined(value: Any) -> str:
    """``module.qualname`` of a function or class defined at module level, else ``''``."""
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not module or not qualname or "<lambda>" in qualname or "<locals>" in qualname:
        return ""
    if getattr(value, "__closure__", None):
        return ""
    return f"{module}.{qualname}"


def callable_identity(value: Any, argument: str, metric: str) -> Any:
    """A comparable identity of the callable ``value`` (plain data), or a MetricArgumentError naming ``argument``.

    A module-level function, builtin or class: ``'module.qualname'``; a bound method: its object's identity
    and the method's name; a ``functools.partial``: the function's identity and its arguments (plain data);
    a callable object: its class's ``'module.qualname'`` and its state (``__getstate__()`` or ``vars()``,
    plain data).
    """
    if isinstance(value, functools.partial):
        args = (value.args, value.keywords)
        if _plain(args):
            return ("partial", callable_identity(value.func, argument, metric), args)
    elif isinstance(value, type) or (callable(value) and hasattr(value, "__code__")) or _is_builtin(value):
        where = _where_defined(value)
        if where:
            return where
    elif hasattr(value, "__self__") and hasattr(value, "__func__"):  # a bound method
        return ("method", callable_identity(value.__self__, argument, metric), value.__func__.__name__)
    elif callable(value):
        where = _where_defined(type(value))
        getstate = getattr(value, "__getstate__", None)
        try:
            state = getstate() if getstate is not None else vars(value)
        except TypeError:
            state = {}  # no __dict__ (slots or a builtin): its class is its identity
        if where and _plain(state):
            return ("object", where, state)
    raise MetricArgumentError(
        f"{metric}: {argument}={value!r} has no identity another process can compare (a lambda, a closure, or an "
        f"object whose state is not plain data), so ranks passing different ones would answer a mix without an "
        f"error. Pass a function defined at module level (def tokenize(text): ...), a functools.partial of one with "
        f"plain arguments, or an object of a module-level class whose attributes are plain data"
    )


def _is_builtin(value: Any) -> bool:
    return type(value).__name__ in ("builtin_function_or_method", "method_descriptor", "wrapper_descriptor")


def file_identity(path: Any) -> str:
    """``'sha256:<hex>'`` of the file's bytes (cached by path, modification time and size), or ``''`` if unreadable."""
    try:
        real = os.path.realpath(os.fspath(path))
        stat = os.stat(real)
    except (OSError, TypeError):
        return ""
    key = (real, stat.st_mtime_ns, stat.st_size)
    with _FILE_LOCK:
        found = _FILE_DIGESTS.get(key)
    if found is None:
        digest = hashlib.sha256()
        with open(real, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        found = f"sha256:{digest.hexdigest()}"
        with _FILE_LOCK:
            _FILE_DIGESTS[key] = found
    return found


def question_of(metric: Any, size: Any) -> Dict[str, Any]:
    """What every rank's ``compute(size)`` of ``metric`` must agree on: the metric, its configuration, the mode
    and ``size``.

    The configuration is every public attribute but those of :data:`NOT_ASKED`
    (``topk``, ``thrs``, ``average``, ...), whatever its type or size: the
    transport compares a digest of a canonical encoding of each field
    (:func:`mmeval.core.wire.canonical_question`), so numpy scalars, long lists
    and nested values all count. A callable counts by its identity and each
    attribute the class lists in ``question_files`` by its file's content.
    """
    question: Dict[str, Any] = {
        "metric": f"{type(metric).__module__}.{type(metric).__qualname__}",
        "dist_collect_mode": metric.dist_collect_mode,
        "size": size,
    }
    for key, value in vars(metric).items():
        if not key.startswith("_") and key not in NOT_ASKED:
            question[key] = value
    return identified(metric, question)


def identified(metric: Any, question: Dict[str, Any]) -> Dict[str, Any]:
    """``question`` with each callable replaced by its identity and each file of ``question_files`` by its digest."""
    for key, value in list(question.items()):
        if callable(value) and not isinstance(value, (type, np.ndarray)):
            question[key] = callable_identity(value, key, metric.name)
    for attr in getattr(type(metric), "question_files", ()):
        value = getattr(metric, attr, None)
        if value is not None:
            question[f"{attr} (content)"] = file_identity(value)
    return question
