import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


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
