"""A launcher started several processes, but the backend in use is ``non_dist``: say so, and what was seen.

The variables of torchrun, MPI launchers, SLURM and Horovod (:data:`LAUNCHER_VARIABLES`) tell
a process it is one of several. When one is seen and ``non_dist`` is in use, a
:class:`~mmeval.core.errors.DistributedLaunchWarning` is issued once per process, naming the
variables and, for each backend that would serve the launcher (:data:`~mmeval.core.known_backends.KNOWN_BACKENDS`)
and each backend whose runtime is active, what was found: the plugin (installed, disabled,
missing), its framework module (imported, importable, missing: looked up in ``sys.modules``
and with ``find_spec``, never imported) and its runtime (the backend's own ``detect()``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from ._metadata import DISABLE_ENV
from .entry_points import AUTO, DEFAULT_ENV
from .errors import DistributedLaunchWarning
from .known_backends import KNOWN_BACKENDS, install_hint

if TYPE_CHECKING:  # pragma: no cover
    from .registry import BackendRegistry

__all__ = [
    "LAUNCHER_VARIABLES",
    "LAUNCHER_NOTES",
    "launcher_environment",
    "framework_state",
    "launch_message",
    "warn_if_launched",
]

#: Environment variables by which launchers tell a process it is one of several:
#: ``(variable, launcher, kind)``; a ``'size'`` variable above 1 or a ``'rank'``
#: variable above 0 means several processes.
LAUNCHER_VARIABLES: Tuple[Tuple[str, str, str], ...] = (
    ("WORLD_SIZE", "torchrun", "size"),
    ("RANK", "torchrun", "rank"),
    ("LOCAL_RANK", "torchrun", "rank"),
    ("OMPI_COMM_WORLD_SIZE", "mpi", "size"),
    ("OMPI_COMM_WORLD_RANK", "mpi", "rank"),
    ("PMI_SIZE", "mpi", "size"),
    ("PMI_RANK", "mpi", "rank"),
    ("PMIX_RANK", "mpi", "rank"),
    ("MPI_LOCALNRANKS", "mpi", "size"),
    ("SLURM_NTASKS", "slurm", "size"),
    ("HOROVOD_SIZE", "horovod", "size"),
    ("HOROVOD_RANK", "horovod", "rank"),
)

#: Said after a launcher's line, where its variables do not always mean a distributed run.
LAUNCHER_NOTES: Dict[str, str] = {"slurm": "ignore this if one process per allocation is intended"}


def launcher_environment() -> Dict[str, str]:
    """The launcher variables of this process that say it is one of several (see :data:`LAUNCHER_VARIABLES`).

    ``{variable: value}``; empty when no launcher started several processes.
    """
    seen: Dict[str, str] = {}
    for var, _launcher, kind in LAUNCHER_VARIABLES:
        value = os.environ.get(var, "").strip()
        try:
            number = int(value)
        except ValueError:
            continue
        if (kind == "size" and number > 1) or (kind == "rank" and number > 0):
            seen[var] = value
    return seen


def framework_state(module: str) -> str:
    """``'imported'``, ``'importable'`` or ``'missing'`` for a top-level module; never imports it.

    ``None`` in ``sys.modules`` is Python's mark of an import that is blocked: ``'missing'``.
    """
    if sys.modules.get(module) is not None:
        return "imported"
    if module in sys.modules:
        return "missing"
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    return "importable" if found else "missing"


def _plugin_state(registry: "BackendRegistry", name: str, installed: List[str]) -> str:
    if name in installed:
        return "installed"
    if registry.scan().by_name.get(name):
        return f"installed, but disabled by {DISABLE_ENV}={os.environ.get(DISABLE_ENV, '')!r}"
    return f"not installed: {install_hint(name) or f'install the distribution providing {name}'}"


def _runtime_state(name: str, detected: bool) -> str:
    """What the framework of an in-tree backend looks like in this process, and what starts its runtime.

    ``detected``: the backend's own ``detect()`` ran (its plugin is installed) and said no runtime is active.
    """
    record = KNOWN_BACKENDS[name]
    step = record.init_step
    if record.framework is None:
        return step
    fw = record.framework
    state = framework_state(fw)
    if state == "missing":
        said = f"the {fw} module is not installed" + (
            f": {record.framework_install}" if record.framework_install else ""
        )
        return f"{said}; then {step}" if step else said
    if state == "imported":
        said = (
            f"the {fw} module is imported, but its runtime is not initialised"
            if detected
            else f"the {fw} module is imported by this process"
        )
    else:
        said = f"the {fw} module is installed here (found, not imported by this process)"
    return f"{said}: {step}" if step else said


def launch_message(registry: "BackendRegistry", asked: Optional[str], seen: Dict[str, str]) -> str:
    """The text of the warning for a process started with launcher variables ``seen`` and ``non_dist`` in use."""

    launchers: List[str] = []
    for var, launcher, _kind in LAUNCHER_VARIABLES:
        if var in seen and launcher not in launchers:
            launchers.append(launcher)
    installed = registry.names()
    active = registry.auto.active(registry)
    how = (
        "was asked for by name" if asked not in (None, AUTO) else "was auto-selected (no distributed runtime detected)"
    )
    if asked is None and registry.explicit_default is None and os.environ.get(DEFAULT_ENV, "").strip() == "non_dist":
        how = f"is set by {DEFAULT_ENV}=non_dist"
    if active:
        how += f" while the runtime of {', '.join(active)} is active in this process"
    # a framework whose runtime one backend found active needs no advice for its other backends
    running = {KNOWN_BACKENDS[n].framework for n in active if n in KNOWN_BACKENDS}
    lines: List[str] = []
    for launcher in launchers:
        grouped: Dict[str, List[str]] = {}  # what was seen -> the backends it describes (one line per distribution)
        for name, record in KNOWN_BACKENDS.items():
            if launcher not in record.launchers or name in active or record.framework in running:
                continue
            plugin = _plugin_state(registry, name, installed)
            grouped.setdefault(f"{plugin}; {_runtime_state(name, plugin == 'installed')}", []).append(name)
        parts = [f"{' / '.join(names)} {'is' if len(names) == 1 else 'are'} {todo}" for todo, names in grouped.items()]
        note = f"; {LAUNCHER_NOTES[launcher]}" if launcher in LAUNCHER_NOTES else ""
        if parts:
            lines.append(f"  - {launcher}: " + "; ".join(parts) + note)
    for name in active:
        lines.append(
            f"  - {name}: its runtime is active in this process: name it (dist_backend={name!r}) or leave "
            "dist_backend unset to evaluate across the processes"
        )
    variables = ", ".join(f"{k}={v}" for k, v in seen.items())
    return (
        f"mmeval: this process is one of several started by a launcher ({variables}), but the dist backend "
        f"'non_dist' {how}: every rank will compute the metric alone, over only the samples it added -- the "
        f"whole dataset on every rank if its sampler takes rank and world size from get_rank_and_world_size() "
        f"(which answers (0, 1) here, so each rank repeats the whole evaluation), or a shard if the sampler splits "
        f"by RANK/WORLD_SIZE (then each rank's result is its shard's, not the dataset's). To evaluate across the "
        f"processes:\n"
        + "\n".join(lines)
        + "\nIf per-rank results are what you want, silence this with warnings.filterwarnings('ignore', "
        "category=mmeval.core.dist.DistributedLaunchWarning)."
    )


def warn_if_launched(registry: "BackendRegistry", asked: Optional[str]) -> None:
    """Issue :class:`DistributedLaunchWarning` once per registry when a launcher is seen and non_dist is in use."""
    if registry.launch_warned:
        return
    seen = launcher_environment()
    if not seen:
        return
    registry.launch_warned = True
    import warnings

    warnings.warn(launch_message(registry, asked, seen), DistributedLaunchWarning, stacklevel=5)
