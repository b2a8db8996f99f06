"""Hostile bytes: the hypothesis properties of fuzz_decoder.py, run in a child process with limits.

The child gets a 4 GiB address-space limit (a runaway allocation becomes a
MemoryError, which would fail a property, instead of an out-of-memory kill)
and a wall-clock limit: a crash (the child killed by a signal), a hang or a
property that fails all fail this test. The number of examples run per
property is recorded. ``MMEVAL_FUZZ_EXAMPLES`` sets the examples per
property (default 2500).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
EXAMPLES = int(os.environ.get("MMEVAL_FUZZ_EXAMPLES", "2500"))
LIMIT_S = 480.0


def test_decoders_survive_hostile_bytes(tmp_path: Path, figures: Any) -> None:
    pytest.importorskip("hypothesis")
    cmd = [
        sys.executable,
        str(HERE / "fuzz_decoder.py"),
        "--examples",
        str(EXAMPLES),
        "--memory-gb",
        "4",
        "--hang-seconds",
        str(LIMIT_S - 30),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=LIMIT_S, cwd=str(tmp_path))
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the fuzzer hung: no result within {LIMIT_S:g}s\n{(exc.stderr or b'')[-4000:]!r}")
    assert proc.returncode >= 0, f"the fuzzer was killed by signal {-proc.returncode}\n{proc.stderr[-6000:]}"
    assert proc.returncode == 0, f"a property failed (rc {proc.returncode}):\n{proc.stderr[-8000:]}"
    counts = json.loads(proc.stdout.strip().splitlines()[-1])["examples"]
    assert len(counts) == 8 and all(n >= EXAMPLES for n in counts.values()), counts
    for name, n in counts.items():
        figures("hypothesis examples", prop=name, examples=n)
    figures("hypothesis examples", prop="total", examples=sum(counts.values()))
