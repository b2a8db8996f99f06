"""tools/tox_summary.py: the closing lines of ``./tools/run-tox`` after envs ran side by side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

SCRIPT = Path(__file__).resolve().parents[3] / "tools" / "tox_summary.py"


def _env(success: bool, output: str, skipped: bool = False) -> Dict[str, Any]:
    return {
        "result": {"success": success, "exit_code": 0 if success else 1, "duration": 12.5, "skipped": skipped},
        "test": [] if skipped else [{"output": output, "err": ""}],
    }


def _summary(tmp_path: Path, envs: Dict[str, Any], tox_code: int) -> subprocess.CompletedProcess:
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"testenvs": envs}))
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(path), str(tox_code)], capture_output=True, text=True, timeout=60
    )


def test_passing_envs_show_their_output_and_end_with_pytests_line_per_env(tmp_path: Path) -> None:
    envs = {
        "py311": _env(True, "collected 3\n...\n===== 3 passed, 1 skipped in 2.01s =====\n"),
        "lint": _env(True, "All checks passed!\n"),
        "py39": _env(True, "", skipped=True),
        "not-selected": {"test": []},
    }
    proc = _summary(tmp_path, envs, 0)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert "collected 3" in proc.stdout  # the output tox hid in parallel mode
    assert "not-selected" not in proc.stdout
    assert lines[-4:] == [
        "  py311: OK in 12.5 s -- 3 passed, 1 skipped in 2.01s",
        "  lint: OK in 12.5 s -- All checks passed!",
        "  py39: SKIP in 12.5 s",
        "  congratulations :)",
    ]


def test_a_failed_env_or_a_failing_tox_exits_non_zero(tmp_path: Path) -> None:
    envs = {"torch": _env(False, "=== 1 failed, 9 passed in 3.00s ===\n"), "lint": _env(True, "ok\n")}
    proc = _summary(tmp_path, envs, 1)
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[-2:] == ["  lint: OK in 12.5 s -- ok", "  evaluation failed :( (torch)"]
    assert "torch: FAIL code 1 in 12.5 s -- 1 failed, 9 passed in 3.00s" in proc.stdout
    # tox failed before any env reported (a bad tox.ini, say): still non-zero
    assert _summary(tmp_path, {}, 2).returncode == 2
    missing = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "absent.json"), "0"], capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 1 and "no tox result" in missing.stdout
