"""Build (once) and check the separate virtual environment holding MMEval 0.2.1 from PyPI.

MMEval 0.2.1 and this project share the import name ``mmeval``, so they cannot
live in one environment. The suite runs 0.2.1's side of the comparison with
this environment's Python.

Run::

    python benchmarks/mmeval021_env.py [--venv DIR]   # build if missing, print its Python

Default location: ``$MMEVAL_BENCH_MMEVAL021_VENV``, else ``.tox/bench-mmeval021``
under the repository. What goes in: ``mmeval==0.2.1`` with its own
requirements, ``torch==2.13.0`` (the CPU wheel on this machine's disk),
``mpi4py`` and the ``mpich`` wheel (for its MPI backend), ``pycocotools`` (its
``COCODetection``), and
``opencv-python-headless`` in place of ``opencv-python`` (``import mmeval``
imports cv2; the headless build needs no libGL).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import List, Optional

REPO = Path(__file__).resolve().parent.parent
#: What the environment must import for the bench (checked after every build; an older build without
#: pycocotools fails it and is rebuilt).
CHECK = (
    "import mmeval, torch, mpi4py, pycocotools; assert mmeval.__version__ == '0.2.1', mmeval.__version__; "
    "print(mmeval.__file__)"
)
#: Requirements of the bench's 0.2.1 side; 0.2.1 itself goes in with --no-deps (see the module doc).
REQUIREMENTS = [
    "numpy",
    "plum-dispatch<2.0.0",
    "pyyaml",
    "rich",
    "scipy",
    "opencv-python-headless>=3",
    "torch==2.13.0",
    "mpi4py",
    "mpich",
    "pycocotools",  # COCODetection (the detection part)
]


def default_venv() -> Path:
    """Where the environment lives unless ``--venv`` says otherwise."""
    env = os.environ.get("MMEVAL_BENCH_MMEVAL021_VENV")
    return Path(env) if env else REPO / ".tox" / "bench-mmeval021"


def venv_python(path: Path) -> Path:
    """The environment's interpreter."""
    return path / "bin" / "python"


def check(path: Path, timeout: float = 300) -> Optional[str]:
    """``None`` when the environment imports MMEval 0.2.1, torch and mpi4py; else why not."""
    python = venv_python(path)
    if not python.exists():
        return f"{python} does not exist"
    try:
        proc = subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, timeout=timeout, cwd="/")
    except subprocess.TimeoutExpired:
        return f"importing mmeval 0.2.1 took more than {timeout:g}s"
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
    return None


def _pip(python: Path, args: List[str], timeout: float) -> None:
    cmd = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, timeout=timeout)


def ensure(path: Path, timeout: float = 1200) -> Path:
    """Build the environment at ``path`` unless it already works; return its Python.

    Raises ``RuntimeError`` with the reason when it cannot be built.
    """
    if check(path) is None:
        return venv_python(path)
    print(f"building the MMEval 0.2.1 environment at {path} (once)", flush=True)
    try:
        venv.EnvBuilder(with_pip=True, clear=True).create(str(path))
        python = venv_python(path)
        _pip(python, REQUIREMENTS, timeout)
        _pip(python, ["--no-deps", "mmeval==0.2.1"], timeout)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        raise RuntimeError(f"could not build the MMEval 0.2.1 environment at {path}: {exc}") from exc
    why = check(path)
    if why is not None:
        raise RuntimeError(f"the MMEval 0.2.1 environment at {path} does not work: {why}")
    return venv_python(path)


def main(argv: Optional[List[str]] = None) -> int:
    """Command line: build if needed and print the environment's Python."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, default=default_venv())
    args = parser.parse_args(argv)
    try:
        print(ensure(args.venv))
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
