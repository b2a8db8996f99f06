"""A metric's field library is imported when the metric needs it, and its absence names the extra."""

from __future__ import annotations

import sys

import pytest

from mmeval.core.errors import MissingExtraError
from mmeval.metrics.extras import EXTRAS, import_extra


@pytest.mark.parametrize("module", sorted(EXTRAS))
def test_a_missing_library_names_the_metric_and_the_extra(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # importing it raises ImportError, as when not installed
    with pytest.raises(MissingExtraError) as info:
        import_extra(module, "SomeMetric")
    extra, dist = EXTRAS[module]
    message = str(info.value)
    assert "SomeMetric" in message and repr(module) in message and dist in message
    assert f"pip install 'mmeval-core[{extra}]'" in message
    assert isinstance(info.value, ImportError)


def test_a_library_outside_the_table_is_named_by_its_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nosuchlib", None)
    with pytest.raises(MissingExtraError, match=r"pip install nosuchlib"):
        import_extra("nosuchlib.sub", "OtherMetric")


def test_an_installed_library_is_returned() -> None:
    assert import_extra("json", "AnyMetric") is sys.modules["json"]


def test_the_extras_exist_in_the_core_distribution() -> None:
    import os

    pyproject = os.path.join(os.path.dirname(__file__), "..", "..", "..", "core", "pyproject.toml")
    text = open(pyproject).read()
    for extra, _ in EXTRAS.values():
        assert f"\n{extra} = [" in text, extra
