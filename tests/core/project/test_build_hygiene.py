"""Installing the project's distributions leaves nothing in the source tree (issue 23, item 9).

``pip install ./core`` (and tox's installs of ./core, ./plugins/* and the test
fixtures) once left ``build/`` and ``*.egg-info`` beside the sources: clutter
for a user, and a race between concurrent builds of one directory (tox envs
run side by side). Each distribution now builds its wheel straight from the
sources; these tests install / build them from a copy of the tree and look.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[3]
DISTRIBUTIONS = [
    "core",
    *sorted(f"plugins/{p.name}" for p in (ROOT / "plugins").iterdir() if (p / "pyproject.toml").exists()),
    *sorted(
        f"tests/fixtures/{p.name}" for p in (ROOT / "tests" / "fixtures").iterdir() if (p / "pyproject.toml").exists()
    ),
]
_DEBRIS = ("build", "*.egg-info", "__pycache__", "dist")


def _env() -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MMEVAL_", "PYTHONPATH")) and k != "VIRTUAL_ENV"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _copy(tmp: Path) -> Path:
    """The distributions' directories, as a clean clone has them."""
    tree = tmp / "tree"
    for rel in DISTRIBUTIONS:
        shutil.copytree(ROOT / rel, tree / rel, ignore=shutil.ignore_patterns(*_DEBRIS))
    return tree


def _debris(tree: Path) -> List[str]:
    found = [p for pattern in ("build", "*.egg-info", "dist") for p in tree.rglob(pattern)]
    return sorted(str(p.relative_to(tree)) for p in found)


def _pip(*args: str, cwd: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", *args], cwd=cwd, capture_output=True, text=True, timeout=900, env=_env()
    )
    assert proc.returncode == 0, f"pip {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def test_pip_install_core_leaves_no_build_or_egg_info_in_the_tree(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    _pip("install", "--no-deps", "--target", str(tmp_path / "site"), "./core", cwd=tree)
    assert _debris(tree) == [], "pip install ./core left these in the source tree"
    installed = tmp_path / "site"
    assert (installed / "mmeval" / "py.typed").is_file(), "the core's py.typed marker was not installed"
    (dist_info,) = installed.glob("mmeval_core-*.dist-info")
    assert "mmeval=mmeval.cli:main" in (dist_info / "entry_points.txt").read_text().replace(" ", "")


def test_every_distribution_builds_out_of_tree_with_its_marker_and_entry_points(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    wheels = tmp_path / "wheels"
    _pip("wheel", "--no-deps", "-w", str(wheels), *(f"./{rel}" for rel in DISTRIBUTIONS), cwd=tree)
    assert _debris(tree) == [], "building the wheels left these in the source tree"
    built = sorted(wheels.glob("*.whl"))
    assert len(built) == len(DISTRIBUTIONS), [w.name for w in built]
    for wheel in built:
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
        if not wheel.name.startswith("mmeval_fixture"):  # the distributions users install are typed
            assert any(n.endswith("/py.typed") for n in names), f"{wheel.name} has no py.typed"
        if not wheel.name.startswith("mmeval_core"):  # every plugin registers backends by entry point
            assert any(n.endswith(".dist-info/entry_points.txt") for n in names), f"{wheel.name} has no entry points"
