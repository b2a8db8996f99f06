"""The README's core install and quickstart, followed literally in a fresh virtual environment.

The test copies what the commands read (``core/``, ``examples/quickstart.py``)
into a temporary checkout, runs the README's Quickstart block line by line in
bash there (``python3 -m venv``, ``pip install ./core``, the quickstart
script) and compares the output with the one the README shows. pip uses
whatever indexes and caches it is configured with; nothing but mmeval-core and
its dependencies (numpy, pluggy, packaging) is installed, so no framework is
downloaded. Then, in the same environment, it checks the README's torch advice:
with a torch already installed, the plugin's install command keeps it (a dry
run, against a stand-in torch distribution: nothing is downloaded).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"


def _section(title: str) -> str:
    return README.read_text().split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _quickstart() -> tuple[List[str], str]:
    """The Quickstart's shell commands and the output the README says they print."""
    section = _section("Quickstart")
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", section, re.S | re.M)
    commands = [b for lang, b in blocks if lang == "bash"]
    shown = [b for lang, b in blocks if lang == ""]
    assert len(commands) == 1 and len(shown) == 1, "the Quickstart shows one bash block and one output block"
    lines = [ln for ln in commands[0].splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return lines, shown[0]


def _env() -> Dict[str, str]:
    """A user's shell: no virtual environment active, no mmeval or Python path settings of this run."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MMEVAL_", "TOX_", "PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV"))
        and k != "VIRTUAL_ENV"
    }
    return env


def _checkout(where: Path, *paths: str) -> Path:
    """The parts of the repository the commands read, as a fresh clone has them (no build outputs)."""
    for rel in paths:
        src, dst = ROOT / rel, where / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        else:
            shutil.copy2(src, dst)
    return where


def _bash(script: str, cwd: Path, timeout: int = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)


def test_quickstart_block_is_what_the_test_runs() -> None:
    lines, shown = _quickstart()
    assert any(re.fullmatch(r"pip install \./core(\s.*)?", ln.split("#")[0].strip()) for ln in lines), lines
    assert any("examples/quickstart.py" in ln for ln in lines), lines
    assert "installed backends:" in shown and "accuracy:" in shown


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("python3") is None, reason="needs bash and python3")
def test_readme_core_install_and_quickstart_in_a_fresh_venv(tmp_path: Path) -> None:
    repo = _checkout(tmp_path / "mmeval", "core", "examples/quickstart.py", "plugins/torch_backend")
    lines, shown = _quickstart()
    # the README's lines, in one shell (`. .venv/bin/activate` must carry over), stopping at the first failure
    script = "set -e\n" + "\n".join(f"echo '+ {i}'\n{ln}" for i, ln in enumerate(lines))
    proc = _bash(script, repo)
    assert proc.returncode == 0, f"the README's Quickstart failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    printed = proc.stdout.split(f"+ {len(lines) - 1}\n", 1)[1]
    assert printed.strip() == shown.strip(), f"the quickstart printed\n{printed}\nthe README shows\n{shown}"

    venv = repo / ".venv"
    assert (venv / "bin" / "python").exists(), "the Quickstart's venv is not at .venv"
    listed = _bash(". .venv/bin/activate && pip list --format=freeze", repo).stdout.lower()
    assert "mmeval-core==" in listed and "torch" not in listed, listed

    # "then the plugin ... leaves torch as it is": a stand-in torch 2.13.0 distribution, then a dry run of the
    # README's plugin line; pip must want mmeval-torch and nothing of torch or CUDA
    site = Path(
        _bash(
            ". .venv/bin/activate && python -c 'import sysconfig; print(sysconfig.get_path(\"purelib\"))'", repo
        ).stdout.strip()
    )
    info = site / "torch-2.13.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0\n")
    (info / "INSTALLER").write_text("pip\n")
    (info / "RECORD").write_text("")
    (plugin_line,) = [
        ln.split("#")[0].strip()
        for ln in _section("Install").splitlines()
        if re.fullmatch(r"pip install \./core \./plugins/torch_backend", ln.split("#")[0].strip())
    ]
    dry = _bash(f". .venv/bin/activate && {plugin_line} --dry-run", repo)
    assert dry.returncode == 0, dry.stdout[-3000:] + dry.stderr[-3000:]
    (would,) = [ln for ln in dry.stdout.splitlines() if ln.startswith("Would install")]
    assert "mmeval-torch-" in would, would
    replaced = re.search(r"(?<![\w-])(torch-\d|nvidia|cuda|triton)", would)
    assert not replaced, f"the plugin's line replaces the torch installed: {would}"
