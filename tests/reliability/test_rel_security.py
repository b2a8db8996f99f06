"""Security: the safe codec on real ranks, and what plugin loading imports.

Safe codec, selected by ``codec='safe'``, by ``MMEVAL_<BACKEND>_CODEC`` or by
``MMEVAL_CODEC``, on three real ranks of each backend (the ``safe_codec``
scenario of rank_main.py): plain data round-trips; a rank sending a
non-plain object makes every rank raise RemoteSerializationError naming it; a
rank forging a pickle frame -- one that would create a directory when
unpickled -- under a header claiming the safe codec, or relabelled as a safe
frame, is refused by every rank and nothing runs; Accuracy.compute() works;
and a hostile rank 0 cannot make the others unpickle its error report.

Plugin loading, in fresh interpreters where mmeval-torch and mmeval-mpi4py
are installed: listing imports no plugin; using one imports that one only; a
module that merely sits on ``sys.path`` is never loaded; an installed plugin
is imported when used (or when auto-selection asks it to ``detect()``), and
never when ``MMEVAL_DISABLE_PLUGINS`` names it or its distribution.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict

import pytest
from reliability_harness import launch_backend, worker_env

WS = 3


@pytest.mark.parametrize("how", ["argument", "backend env var", "MMEVAL_CODEC"])
def test_safe_codec_on_real_ranks(backend: str, how: str, scratch: Path, figures: Any) -> None:
    codec, env = "", {}
    if how == "argument":
        codec = "safe"
    elif how == "backend env var":
        env = {f"MMEVAL_{backend.upper()}_CODEC": "safe"}
    else:
        env = {"MMEVAL_CODEC": "safe"}
    marker_dir = scratch / "markers"
    marker_dir.mkdir()
    with launch_backend(
        backend, scratch, WS, ["safe_codec"], timeout=60, params={"scratch": str(marker_dir)}, codec=codec, env=env
    ) as launch:
        infos = launch.results(range(WS), "safe_codec", 180)
    assert not list(marker_dir.iterdir()), "a forged frame ran code"
    for r, info in infos.items():
        assert f"rank {WS - 1}" in info["non_plain"]["message"]
        assert info["forged_pickle"]["type"] == "UnsafePayloadError"
        assert info["relabelled"]["type"] == "FrameDecodeError"
        assert info["hostile_error_report"]["type"] == ("KeyError" if r == 0 else "RemoteMetricError")
    figures(
        "safe codec",
        backend=backend,
        selected_by=how,
        non_plain=infos[0]["non_plain"]["type"],
        forged_pickle=infos[0]["forged_pickle"]["type"],
        relabelled=infos[0]["relabelled"]["type"],
        hostile_error_report=infos[1]["hostile_error_report"]["type"],
    )


# --------------------------------------------------------------------------
# plugin loading
# --------------------------------------------------------------------------

PLUGIN_MODULES = ("mmeval_torch", "mmeval_mpi4py", "mmeval_horovod", "torch", "mpi4py", "mmeval_sneaky")

PROBE = """
import json, os, sys
from mmeval.core import dist
out = {"listed": dist.list_all_backends()}
mods = lambda: sorted(m for m in sys.modules if m.split(".")[0] in %r)
out["after_listing"] = mods()
infos = {i.name: i.status for i in dist.backend_infos()}
out["statuses"] = infos
out["after_infos"] = mods()
for step in os.environ.get("PROBE_STEPS", "").split(","):
    if not step:
        continue
    try:
        if step == "auto":
            out["auto"] = dist.resolve_backend_name("auto")
        else:
            out[step] = type(dist.get_dist_backend(step)).__name__
    except Exception as exc:
        out[step] = f"{type(exc).__name__}: {exc}"
    out["after_" + step] = mods()
print(json.dumps(out))
""" % (PLUGIN_MODULES,)


def _probe(tmp: Path, steps: str = "", extra_path: str = "", **env: str) -> Dict[str, Any]:
    full = worker_env(env)
    full["PROBE_STEPS"] = steps
    if extra_path:
        full["PYTHONPATH"] = extra_path + os.pathsep + full.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(PROBE)],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        cwd=str(tmp),
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _sneaky(tmp: Path, with_metadata: bool) -> Path:
    """A plugin module that leaves a marker file when imported (and, optionally, the metadata installing it)."""
    site = tmp / "site"
    site.mkdir()
    marker = tmp / "imported"
    (site / "mmeval_sneaky.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "from mmeval.core.dist_backends import NonDist\n"
        "class Sneaky(NonDist):\n    name = 'sneaky'\n"
    )
    if with_metadata:
        info = site / "mmeval_sneaky-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mmeval-sneaky\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text("[mmeval.dist_backends]\nsneaky = mmeval_sneaky:Sneaky\n")
    return site


@pytest.mark.usefixtures("torch_available", "mpi_available")
def test_listing_imports_nothing_and_using_imports_one(tmp_path: Path) -> None:
    out = _probe(tmp_path, steps="torch_cpu")
    assert {"torch_cpu", "torch_cuda", "mpi4py"} <= set(out["listed"])
    assert out["after_listing"] == [] and out["after_infos"] == []
    assert out["torch_cpu"] == "TorchCPUDist"
    assert "mmeval_torch" in out["after_torch_cpu"]
    assert not {"mmeval_mpi4py", "mpi4py"} & set(out["after_torch_cpu"])


@pytest.mark.usefixtures("torch_available", "mpi_available")
def test_disable_plugins_by_backend_and_by_distribution(tmp_path: Path) -> None:
    out = _probe(tmp_path, steps="torch_cpu", MMEVAL_DISABLE_PLUGINS="torch_cpu")
    assert "torch_cpu" not in out["listed"] and "torch_cuda" in out["listed"]
    assert out["statuses"]["torch_cpu"] == "disabled"
    assert out["torch_cpu"].startswith("BackendNotFoundError") and "MMEVAL_DISABLE_PLUGINS" in out["torch_cpu"]
    assert "mmeval_torch" not in out["after_torch_cpu"]
    out = _probe(tmp_path, steps="auto", MMEVAL_DISABLE_PLUGINS="mmeval-torch, mmeval_mpi4py")
    assert not {"torch_cpu", "torch_cuda", "mpi4py"} & set(out["listed"])
    assert out["auto"] == "non_dist"
    assert not {"mmeval_torch", "mmeval_mpi4py", "torch", "mpi4py"} & set(out["after_auto"])


def test_a_module_on_sys_path_is_not_a_plugin(tmp_path: Path) -> None:
    site = _sneaky(tmp_path, with_metadata=False)
    out = _probe(tmp_path, steps="auto,sneaky", extra_path=str(site))
    assert "sneaky" not in out["listed"]
    assert out["sneaky"].startswith("BackendNotFoundError")
    assert not (tmp_path / "imported").exists()


def test_an_installed_plugin_loads_only_when_used_and_never_when_disabled(tmp_path: Path) -> None:
    site = _sneaky(tmp_path, with_metadata=True)
    marker = tmp_path / "imported"
    out = _probe(tmp_path, extra_path=str(site), MMEVAL_DISABLE_PLUGINS="sneaky", steps="auto,sneaky")
    assert "sneaky" not in out["listed"] and out["statuses"]["sneaky"] == "disabled"
    assert out["auto"] == "non_dist" and out["sneaky"].startswith("BackendNotFoundError")
    assert not marker.exists(), "a disabled plugin was imported"
    out = _probe(tmp_path, extra_path=str(site))
    assert "sneaky" in out["listed"] and "mmeval_sneaky" not in out["after_infos"]
    assert not marker.exists(), "listing imported a plugin"
    out = _probe(tmp_path, extra_path=str(site), steps="sneaky")
    assert out["sneaky"] == "Sneaky" and marker.exists()
