"""A broken or slow plugin is reported and skipped, never the end of the evaluation (issue 20, item 8).

The misbehaving plugins live in tests/fixtures/hostile_plugin; each test declares some of them as the entry
points of a distribution ``mmeval-fixture-hostile`` (a dist-info in a temporary directory) and runs a whole
evaluation with the default backend in a real child process.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import time
from typing import Dict

import pytest

from mmeval.core import dist
from mmeval.core.errors import BackendNotFoundError, InvalidBackendNameError

HOSTILE_SRC = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "hostile_plugin" / "src"

ENTRY_POINTS = {
    "hostile_exit": "mmeval_fixture_hostile.exits:ExitDist",
    "hostile_sleep": "mmeval_fixture_hostile.sleeps:SleepyDist",
    "hostile_detect": "mmeval_fixture_hostile.hangs:HangingDetectDist",
    "hostile_spawn": "mmeval_fixture_hostile.spawns:SpawnDist",
}


def hostile_env(tmp_path: pathlib.Path, *names: str, **extra: str) -> Dict[str, str]:
    """An environment whose ``mmeval.dist_backends`` group holds the named hostile plugins (other fixtures off)."""
    info = tmp_path / "mmeval_fixture_hostile-0.0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mmeval-fixture-hostile\nVersion: 0.0.1\n")
    lines = "".join(f"{name} = {ENTRY_POINTS[name]}\n" for name in names)
    (info / "entry_points.txt").write_text("[mmeval.dist_backends]\n" + lines)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(HOSTILE_SRC)])
    env["MMEVAL_DISABLE_PLUGINS"] = "mmeval-fixture-plugin,mmeval-fixture-rival"
    env.update(extra)
    return env


EVAL = textwrap.dedent("""
    import json, sys
    import numpy as np
    from mmeval import Accuracy
    from mmeval.core.dist import get_dist_backend
    from mmeval.core.errors import BackendLoadError

    acc = Accuracy()
    acc.add(np.array([1, 0, 1]), np.array([1, 1, 1]))
    out = {"result": acc.compute(), "backend": type(acc.dist_comm).__name__}
    if len(sys.argv) > 1:  # the broken plugin named explicitly: an error, not an exit
        try:
            get_dist_backend(sys.argv[1])
        except BackendLoadError as exc:
            out["named"] = str(exc)
    print(json.dumps(out))
""")


def evaluate(env: Dict[str, str], *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", EVAL, *args], capture_output=True, text=True, env=env, timeout=timeout)


def test_a_plugin_calling_sys_exit_at_import_is_skipped_with_a_warning(tmp_path):
    proc = evaluate(hostile_env(tmp_path, "hostile_exit"), "hostile_exit")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["backend"] == "NonDist" and set(out["result"]) == {"top1"}
    for what in ("hostile_exit", "mmeval_fixture_hostile.exits:ExitDist", "mmeval-fixture-hostile", "SystemExit"):
        assert what in proc.stderr, (what, proc.stderr)
    assert "SystemExit" in out["named"] and "hostile_exit" in out["named"]


@pytest.mark.parametrize("name", ["hostile_sleep", "hostile_detect"])
def test_a_hanging_plugin_does_not_hang_compute(tmp_path, name):
    env = hostile_env(tmp_path, name, MMEVAL_AUTO_SELECT_TIMEOUT="2")
    start = time.monotonic()
    proc = evaluate(env, *(["hostile_sleep"] if name == "hostile_sleep" else []))
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["backend"] == "NonDist"
    assert took < 45, took
    assert name in proc.stderr and "MMEVAL_AUTO_SELECT_TIMEOUT" in proc.stderr and "2s" in proc.stderr, proc.stderr
    assert "mmeval-fixture-hostile" in proc.stderr
    if name == "hostile_sleep":  # named afterwards: refused at once, not stuck behind the import still running
        assert "did not finish within 2s" in json.loads(proc.stdout)["named"]


def test_the_auto_selection_bound_rejects_a_bad_value(monkeypatch):
    from mmeval.core.auto_select import auto_select_timeout

    assert auto_select_timeout() == 30.0
    monkeypatch.setenv("MMEVAL_AUTO_SELECT_TIMEOUT", "5")
    assert auto_select_timeout() == 5.0
    for bad in ("0", "-1", "nan", "inf", "soon"):
        monkeypatch.setenv("MMEVAL_AUTO_SELECT_TIMEOUT", bad)
        with pytest.raises(ValueError, match="MMEVAL_AUTO_SELECT_TIMEOUT"):
            auto_select_timeout()


# --- rank and world size for a sampler (issue 23, item 2) -------------------------------------------------------


def test_rank_and_world_size_follow_the_backend_in_use(monkeypatch):
    from mmeval.core.dist import get_rank_and_world_size

    assert get_rank_and_world_size() == (0, 1)
    assert get_rank_and_world_size("non_dist") == (0, 1)
    assert get_rank_and_world_size("star") == (0, 1)  # its runtime is not active: one process
    monkeypatch.setenv("MMEVAL_STAR_WORLD_SIZE", "3")
    monkeypatch.setenv("MMEVAL_STAR_RANK", "2")
    assert get_rank_and_world_size("star") == (2, 3)
    assert get_rank_and_world_size() == (2, 3)  # auto-selected
    assert get_rank_and_world_size("non_dist") == (0, 1)
    with pytest.raises(BackendNotFoundError):
        get_rank_and_world_size("nope")


# --- "did you mean" across case and '-' (issue 23, item 6) ------------------------------------------------------


@pytest.mark.parametrize("value", ["Torch-CPU", "TORCH_CPU", "torch-cpu"])
def test_a_name_in_the_wrong_case_gets_the_right_one(monkeypatch, value):
    from mmeval import Accuracy

    expected = "Did you mean 'torch_cpu'?"
    for ask in (dist.set_default_dist_backend, lambda n: Accuracy(dist_backend=n), dist.validate_backend_name):
        with pytest.raises((BackendNotFoundError, InvalidBackendNameError)) as info:
            ask(value)
        assert expected in str(info.value), str(info.value)
    monkeypatch.setenv("MMEVAL_DIST_BACKEND", value)
    with pytest.raises((BackendNotFoundError, InvalidBackendNameError)) as info:
        dist.get_default_dist_backend()
    assert expected in str(info.value) and "MMEVAL_DIST_BACKEND" in str(info.value)
    with pytest.raises(InvalidBackendNameError, match="Did you mean 'star'"):
        dist.set_default_dist_backend("Star")
