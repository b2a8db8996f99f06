"""The jax backend tests: real multi-process JAX groups (``jax_ranks.run_ranks``), CPU only.

Skipped as a whole where jax is not installed, except under ``tox -e jax``
(``MMEVAL_REQUIRE_JAX=1``), which installs it.
"""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # the tests import jax_ranks by name
    sys.path.insert(0, HERE)

if os.environ.get("MMEVAL_REQUIRE_JAX"):  # tox -e jax: a missing jax fails instead of skipping
    import jax  # noqa: F401
    import mmeval_jax  # noqa: F401
else:
    pytest.importorskip("jax")
