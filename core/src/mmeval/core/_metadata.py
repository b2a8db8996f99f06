"""Entry-point access, the plugin disable list and plugin metadata, shared by the backend registry and the hooks.

Python 3.9's ``importlib.metadata.entry_points()`` has no ``group=`` selection
and does not deduplicate a distribution found twice on ``sys.path``; the
``importlib-metadata`` backport does both, so it is used there.

``MMEVAL_DISABLE_PLUGINS`` is read and compared in one place,
:func:`is_disabled`, for both entry-point groups (``mmeval.dist_backends`` and
``mmeval.hooks``).
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, FrozenSet, List, Optional

if sys.version_info >= (3, 10):
    import importlib.metadata as importlib_metadata
else:  # pragma: no cover - exercised by the py39 env
    import importlib_metadata

__all__ = [
    "importlib_metadata",
    "DISABLE_ENV",
    "entry_points_in_group",
    "distribution_of",
    "distribution_name",
    "normalize_plugin_name",
    "disabled_plugins",
    "is_disabled",
    "distribution_version",
    "distribution_label",
    "core_requirement",
    "core_version",
    "satisfies",
]

#: Comma-separated entry-point or distribution names never to load.
DISABLE_ENV = "MMEVAL_DISABLE_PLUGINS"

_SEPARATORS = re.compile(r"[-_.]+")


def entry_points_in_group(group: str) -> List[Any]:
    """The entry points of ``group`` from every installed distribution (one per distribution)."""
    return list(importlib_metadata.entry_points(group=group))


def distribution_of(ep: Any) -> Any:
    """The distribution an entry point came from, or ``None`` if unknown."""
    return getattr(ep, "dist", None)


def distribution_name(ep: Any) -> Optional[str]:
    """The project name (``Name:`` of the metadata) of the distribution ``ep`` came from, ``None`` if unknown."""
    dist = distribution_of(ep)
    if dist is None:
        return None
    return str(dist.metadata["Name"] or dist.name)


def normalize_plugin_name(name: str) -> str:
    """Lower case, and runs of ``-``, ``_`` and ``.`` as one ``-`` (PEP 503, as pip compares project names).

    Applied to both sides of every comparison with the disable list, so
    ``mmeval_torch``, ``MMEval-Torch`` and ``mmeval.torch`` all name the
    distribution ``mmeval-torch``.
    """
    return _SEPARATORS.sub("-", name.strip()).lower()


def disabled_plugins() -> FrozenSet[str]:
    """The normalised names listed in ``$MMEVAL_DISABLE_PLUGINS`` (read at each call)."""
    raw = os.environ.get(DISABLE_ENV, "")
    return frozenset(normalize_plugin_name(part) for part in raw.split(",") if part.strip())


def is_disabled(ep: Any, disabled: Optional[FrozenSet[str]] = None) -> bool:
    """Whether entry point ``ep`` is disabled by its own name or by its distribution's name.

    ``disabled`` defaults to :func:`disabled_plugins` (pass it when checking
    many entry points at once).
    """
    names = disabled_plugins() if disabled is None else disabled
    if not names:
        return False
    if normalize_plugin_name(ep.name) in names:
        return True
    dist = distribution_name(ep)
    return dist is not None and normalize_plugin_name(dist) in names


def distribution_version(ep: Any) -> str:
    """The version of the distribution ``ep`` came from, ``'?'`` if unknown."""
    dist = distribution_of(ep)
    return str(dist.version) if dist is not None else "?"


def distribution_label(ep: Any) -> str:
    """``'<name> <version>'`` of the distribution ``ep`` came from (``'<unknown distribution> ?'`` if unknown)."""
    return f"{distribution_name(ep) or '<unknown distribution>'} {distribution_version(ep)}"


def core_requirement(ep: Any) -> Optional[str]:
    """The ``mmeval-core`` requirement (``'mmeval-core<0.2,>=0.1'``) of the distribution ``ep`` came from, if any."""
    dist = distribution_of(ep)
    if dist is None:
        return None
    for req in dist.requires or ():
        if re.match(r"mmeval[-_.]core\b", req, re.IGNORECASE) and "extra ==" not in req:
            return str(req).split(";")[0].strip()
    return None


def core_version() -> str:
    """The installed mmeval-core version."""
    from ..version import __version__

    return __version__


def satisfies(version: str, requirement: str) -> bool:
    """Whether ``version`` of mmeval-core meets ``requirement`` (``'mmeval-core>=0.1,<0.2'``), by PEP 440.

    Uses :mod:`packaging`. Pre-releases count as the versions they are
    (``0.1.0rc1`` comes before ``0.1``, so ``>=0.1`` rejects it). A requirement
    that does not parse is not held against the plugin (True).
    """
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    try:
        spec = Requirement(requirement).specifier
        have = Version(version)
    except (InvalidRequirement, InvalidVersion):
        return True
    return spec.contains(have, prereleases=True)
