"""What makes a metric refuse: bad constructor arguments, a bad ``compute()`` argument, a refused ``add()``,
results restored from another rank, a named backend that is not running; and how a refusal on one rank
reaches every rank at once (:func:`refuse`), instead of leaving the peers waiting for the timeout.
"""

from __future__ import annotations

import difflib
import inspect
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from ..dist import get_default_dist_backend, launcher_environment, running_dist_backend, validate_backend_name
from ..dist_backends.base_backend import BaseDistBackend
from ..dist_backends.transport import asking
from ..errors import CollectiveFailedError, CollectiveMismatchError, CollectiveTimeoutError
from ..results import RankResults
from . import coverage
from .protocols import Participant

__all__ = ["adding_rank", "check_arguments", "check_runtime", "refusal", "refusal_at_compute", "refuse"]

COLLECT_MODES = ("unzip", "cat")


def check_arguments(cls: type, dist_collect_mode: str, dist_backend: Any, unexpected: Dict[str, Any]) -> None:
    """Refuse :class:`~mmeval.core.BaseMetric` arguments, naming the metric (with a "did you mean")."""
    if unexpected:
        raise TypeError(_unexpected_arguments(cls, unexpected))
    if dist_collect_mode not in COLLECT_MODES:
        raise ValueError(f"dist_collect_mode={dist_collect_mode!r} is not supported; use one of {list(COLLECT_MODES)}")
    if isinstance(dist_backend, str) and dist_backend != "auto":
        validate_backend_name(dist_backend)
    elif dist_backend is None:
        get_default_dist_backend()  # a bad MMEVAL_DIST_BACKEND raises here, naming the variable
    elif not isinstance(dist_backend, (str, BaseDistBackend)):
        raise TypeError(
            f"dist_backend must be a backend name, a BaseDistBackend instance or None, got {dist_backend!r}"
        )


def _unexpected_arguments(cls: type, unexpected: Dict[str, Any]) -> str:
    """``Accuracy() got an unexpected keyword argument 'top_k'; did you mean 'topk'?``"""
    known: List[str] = []
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None and klass is not object:
            known += [
                p.name
                for p in inspect.signature(init).parameters.values()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
            ]
    lines = []
    for key in unexpected:
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f"; it takes {sorted(set(known))}"
        lines.append(f"{cls.__name__}() got an unexpected keyword argument {key!r}{hint}")
    return " ".join(lines)


def refusal(name: str, kept: RankResults, size: Any, backend: BaseDistBackend) -> Optional[str]:
    """Why this rank, having ``kept`` this, cannot take part in ``compute(size)`` of the metric ``name``
    (``None``: it can), naming the argument."""
    if size is not None and (isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size <= 0):
        return f"{name}.compute(size={size!r}): size must be positive: an int, len(dataset), or None"
    if kept.refusals:
        return f"{name}.add() was refused since reset(): {kept.refusals[0]}"
    origin = kept.origin
    if origin is not None and backend.is_initialized and origin != (backend.rank, backend.world_size):
        return (
            f"{name} holds results added on rank {origin[0]} of {origin[1]}, restored from a pickle "
            f"here (rank {backend.rank} of {backend.world_size}): they would count twice; reset() first"
        )
    return None


def refusal_at_compute(
    metric: Participant, dist_backend: Union[str, BaseDistBackend, None], size: Any, backend: BaseDistBackend
) -> Optional[str]:
    """Why this rank cannot take part in ``compute(size)`` on ``backend`` (``None``: it can), once ``metric``'s
    samples kept to summarize are summarized (a failure there is one more refusal).

    Raises at once (see :func:`check_runtime`) when the backend ``dist_backend`` names is not running; forgets the
    last coverage report (:func:`~mmeval.core.sync.coverage.start`).
    """
    check_runtime(metric.name, dist_backend, backend)
    coverage.start(metric.sink)
    try:
        metric.computation._summarize_pending()
    except Exception as exc:  # every rank must hear of it: a refusal reaches them all
        metric.kept.refusals.append(f"summarizing the samples added on this rank failed: {exc!r}")
    return refusal(metric.name, metric.kept, size, backend)


def adding_rank(dist_backend: Union[str, BaseDistBackend, None]) -> Optional[Tuple[int, int]]:
    """``(rank, world_size)`` of a metric's ``dist_backend`` when it already runs across ranks here (else ``None``).

    Starts nothing: a backend not yet created or initialised in this process
    (a metric's first ``add()`` before the first ``compute()`` under
    auto-selection, an MPI not yet started) is not consulted, so ``add()``
    never imports a plugin, initialises a runtime or waits on a peer.
    """
    try:
        backend = dist_backend
        if isinstance(backend, BaseDistBackend):
            running: Optional[BaseDistBackend] = backend if backend.is_initialized else None
        else:
            running = running_dist_backend(backend if backend is not None else get_default_dist_backend())
        if running is not None and running.world_size > 1:
            return (running.rank, running.world_size)
    except Exception:  # nothing usable yet: compute() will say why
        pass
    return None


def check_runtime(name: str, dist_backend: Union[str, BaseDistBackend, None], backend: BaseDistBackend) -> None:
    """Raise when the backend a metric names (``dist_backend``, resolved to ``backend``) is not running while a
    launcher started several processes."""
    named = dist_backend if dist_backend is not None else get_default_dist_backend()
    label = named if isinstance(named, str) else (backend.name or type(backend).__name__)
    if label in ("auto", "non_dist") or backend.is_initialized:
        return
    seen = launcher_environment()
    if not seen:
        return
    how = "dist_backend=" if dist_backend is not None else "the default backend (MMEVAL_DIST_BACKEND)"
    variables = ", ".join(f"{k}={v}" for k, v in seen.items())
    raise RuntimeError(
        f"{name}.compute(): {how} names the dist backend {label!r}, whose runtime is not active in "
        f"this process, while a launcher's variables say several processes run ({variables}): each rank would "
        f"answer on its own shard. Initialise that runtime in every process before compute() (e.g. "
        f"torch.distributed.init_process_group for torch_cpu, the launcher's MPI for mpi4py, hvd.init() for "
        f"Horovod), name the backend of the launcher you use, or dist_backend='non_dist' for one answer per process"
    )


def refuse(backend: BaseDistBackend, reason: str, reduction: bool, question: Dict[str, Any]) -> None:
    """Raise ``ValueError(reason)`` here and make every peer raise at once, in its first collective.

    The refusing rank enters the collective its peers start ``compute()`` with
    (a reduction for a state metric, an all-gather otherwise), asking its
    ``question`` plus ``refused=reason``: the questions differ, so every peer raises
    :class:`~mmeval.core.errors.CollectiveMismatchError` naming the reason,
    instead of waiting for the timeout. ``reason`` names the rank and the
    argument (at most ~140 characters are shown to the peers).
    """
    try:
        with asking({**question, "refused": reason}):
            if reduction:
                backend.all_reduce(np.zeros(1, dtype=np.int64), op="sum")
            else:
                backend.all_gather_object(None)
    except (CollectiveMismatchError, CollectiveTimeoutError, CollectiveFailedError) as exc:
        raise ValueError(reason) from exc
    raise ValueError(reason)  # every rank refused alike
