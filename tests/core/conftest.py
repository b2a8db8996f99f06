import importlib.util
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# tests/ holds folders named as frameworks (tests/torch, tests/jax, tests/paddle, tests/horovod: each backend's
# suite). The shared metric case table puts tests/ on sys.path, and then, where a framework is not installed,
# ``import torch`` finds that folder as a namespace package: every ``pytest.importorskip("torch")`` would run its
# test against an empty module instead of skipping. Where the framework is truly absent, its import fails, as it
# does for a user (None in sys.modules makes ``import`` raise ImportError).
for _framework in ("torch", "jax", "paddle", "horovod"):
    if _framework not in sys.modules and importlib.util.find_spec(_framework) is None:
        sys.modules[_framework] = None  # type: ignore[assignment]


@pytest.fixture(autouse=True)
def _clean_registry(monkeypatch):
    """Every test starts with a fresh registry and no mmeval environment settings."""
    for var in list(os.environ):
        if var.startswith("MMEVAL_"):
            monkeypatch.delenv(var, raising=False)
    from mmeval.core import dist
    from mmeval.core.registry import BackendRegistry

    monkeypatch.setattr(dist, "_registry", BackendRegistry())  # the facade's one registry, fresh for this test
    yield
