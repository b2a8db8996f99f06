"""The framework adapters (mmeval.integrations) import their frameworks only when used.

Runs in every core env (no framework installed there) and in the adapters env (all installed): importing
the package, the accelerate and the torchmetrics adapters imports no framework; the adapters that
subclass or register into a framework (Lightning, MMEngine) say which distribution to install when it
is missing.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

FRAMEWORKS = ("torch", "torchmetrics", "lightning", "pytorch_lightning", "mmengine", "accelerate")


def test_importing_the_light_adapters_imports_no_framework():
    code = (
        "import sys, json, mmeval, mmeval.collection, mmeval.integrations, mmeval.integrations.accelerate, "
        "mmeval.integrations.torchmetrics; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r})))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []


@pytest.mark.parametrize("module, framework", [("lightning", "torchmetrics"), ("mmengine", "mmengine")])
def test_an_adapter_names_its_missing_framework(module, framework):
    code = f"import mmeval.integrations.{module}"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if importlib.util.find_spec(framework) is not None:  # the adapters env: it imports
        assert proc.returncode == 0, proc.stderr
    else:
        assert proc.returncode == 1 and "MissingExtraError" in proc.stderr, proc.stderr
        assert f"pip install {framework}" in proc.stderr, proc.stderr
