"""paddle_dist tests: real ranks under ``python -m paddle.distributed.launch`` (gloo on the CPU).

Without paddle the tests are skipped, except where ``MMEVAL_REQUIRE_PADDLE=1``
(the ``paddle`` tox env), where a missing paddle fails them.
"""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

if os.environ.get("MMEVAL_REQUIRE_PADDLE") != "1":
    pytest.importorskip("paddle")
