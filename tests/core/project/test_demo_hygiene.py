"""The demo's listing and its footprint (issue 16, item 12).

The demo itself needs torch, scikit-learn and MPI (``tox -e demo`` runs it);
here, with the core alone, ``examples/demo.py --plan`` prints the listing the
demo prints above its table, and the examples' sources are held to what the
demo run showed: no fixed file under the temporary directory, no progress bar
off a terminal.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
PLANNED = ("torch_cpu", "mpi4py", "torch_horovod", "tf_horovod")


def test_demo_listing_says_what_runs_and_why_the_rest_is_skipped() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MMEVAL_")}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "demo.py"), "--plan"], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = {ln.split()[0]: ln for ln in proc.stdout.splitlines() if ln.startswith("  ") and ln.split()}
    assert "runs: single process" in lines["non_dist"]
    for name in PLANNED:
        assert name in lines, f"the demo's listing does not mention {name}:\n{proc.stdout}"
        line = lines[name]
        assert re.search(r"\bruns: \d+ processes$|skipped: \S.*$", line), line
        assert not re.search(r"\bok\b", line), f"{name} is listed 'ok' although the demo may skip it: {line}"


def test_examples_write_no_fixed_temporary_file_and_show_bars_only_on_a_terminal() -> None:
    sources = {p.relative_to(ROOT).as_posix(): p.read_text() for p in EXAMPLES.rglob("*.py")}
    for path, text in sources.items():
        assert "gettempdir()" not in text and "/tmp/" not in text, f"{path} writes to a fixed temporary path"
        assert "mkdtemp(" not in text, f"{path}: use tempfile.TemporaryDirectory, removed at exit"
        if path != "examples/digits_dist_eval/digits_common.py":
            assert "tqdm.tqdm(" not in text, f"{path}: show progress through digits_common.progress (TTY only)"
    common = sources["examples/digits_dist_eval/digits_common.py"]
    assert "isatty()" in common
    assert "TemporaryDirectory(" in sources["examples/demo.py"]


def test_demo_says_which_unit_each_column_has() -> None:
    """top-1 / top-3 are fractions and mAP a percentage (MMEval's units): the header and the table say so."""
    import ast

    tree = ast.parse((EXAMPLES / "demo.py").read_text())
    header = ast.get_docstring(tree) or ""
    notes = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "UNITS_NOTE" for t in node.targets)
        and isinstance(node.value, ast.Constant)
    ]
    assert notes, "examples/demo.py has no UNITS_NOTE printed above its table"
    for text in (header, notes[0]):
        assert re.search(r"top-1 and top-3 are fractions", text) and re.search(r"mAP (is )?a percentage", text), text
        assert "MMEval 0.2.1" in text
    assert "print(UNITS_NOTE)" in (EXAMPLES / "demo.py").read_text()
