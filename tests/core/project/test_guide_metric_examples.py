"""The examples of docs/writing-a-metric.md run and print what the guide says they print."""

from __future__ import annotations

import ast
import contextlib
import io
import re
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "writing-a-metric.md"


def _examples():
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)
    return [b for b in blocks if "print(" in b and "class " in b]


@pytest.mark.parametrize("code", _examples(), ids=lambda c: re.search(r"class (\w+)", c).group(1))
def test_guide_example_prints_what_it_says(code):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(GUIDE), "exec"), {})
    printed = [ast.literal_eval(line) for line in out.getvalue().splitlines()]
    claimed = [ast.literal_eval(c) for c in re.findall(r"print\(.*\)\s+# (\{.*\})", code)]
    assert printed and printed == claimed


def test_guide_has_both_kinds():
    assert len(_examples()) == 2
