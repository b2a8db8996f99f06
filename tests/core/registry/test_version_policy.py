"""The version policy (issue 35, item 3): what ``mmeval.__version__`` and ``mmeval.MMEVAL_API_VERSION`` answer."""

from __future__ import annotations

import re
from pathlib import Path

import mmeval

ROOT = Path(__file__).resolve().parents[3]


def test_the_version_says_what_the_distribution_is_and_the_api_version_what_it_implements():
    """``mmeval.__version__`` is mmeval-core's own (what pip and the plugins' pins see); ``MMEVAL_API_VERSION`` is
    the MMEval release whose API it implements, for the compatibility checks MMEval's users write."""
    from importlib.metadata import version

    from packaging.version import Version

    assert mmeval.__version__ == version("mmeval-core")
    assert mmeval.MMEVAL_API_VERSION == "0.2.1" and "MMEVAL_API_VERSION" in dir(mmeval)
    # the check a drop-in user writes, asked of this package, answers for the API (MMEval itself has no such
    # attribute, so the same line falls back to MMEval's own __version__ there)
    api = Version(getattr(mmeval, "MMEVAL_API_VERSION", mmeval.__version__))
    assert api == Version("0.2.1")
    # the checks MMEval's users already write answer for the API they ask about: mmeval-core is kept above the
    # MMEval release it implements (the 0.3 series implements 0.2.1's API)
    assert Version(mmeval.__version__) >= Version("0.2.1") and Version(mmeval.__version__) >= api
    from mmeval.version import version_info

    assert version_info >= (0, 2) and version_info == tuple(int(p) for p in mmeval.__version__.split("."))
    # what it claims: every metric MMEval 0.2.1 exports (its 36 names) is here
    from mmeval import metrics

    assert len([n for n in metrics.__all__ if n[:1].isupper()]) >= 36


def test_the_api_version_is_the_mmeval_release_the_readme_and_pyproject_name():
    readme = (ROOT / "README.md").read_text()
    (claimed,) = re.findall(r"^## Coming from MMEval ([0-9.]+)$", readme, re.M)
    assert mmeval.MMEVAL_API_VERSION == claimed
    (declared,) = re.findall(r'^version = "([^"]+)"$', (ROOT / "core" / "pyproject.toml").read_text(), re.M)
    assert mmeval.__version__ == declared
