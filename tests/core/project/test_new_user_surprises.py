"""A new user's small surprises (issue 35, item 7): what the README and the messages say matches what happens.

Each test states one surprise: the README's epoch loop and its ``reset()``, the ``--check`` exit-code rule
in the README against the CLI's ``--help``, the multi-node torchrun recipe's ``init_process_group``, every
setting the distributed layer reads in the README's table, and a one-hot label tensor's error naming argmax.
The launch warning's text under a launcher is tested with the launches (tests/core/registry/test_registry_launcher.py).
"""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from mmeval import Accuracy, SingleLabelMetric

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()


def _section(title: str) -> str:
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_loop_resets_and_what_happens_without_it():
    api = _section("The API in five lines")
    loop = next(block for block in api.split("```python")[1:] if "for epoch in" in block)
    assert "acc.reset()" in loop.split("```", 1)[0]
    # what the README says happens without reset(): the second epoch holds both epochs' samples, more than size=
    # can explain, and compute() raises naming reset() -- never the first epoch's answer again
    assert "raises on every rank, naming `reset()`" in " ".join(_section("The API in five lines").split())
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 8)
    first, second = np.eye(3)[labels], np.eye(3)[(labels + 1) % 3]  # all right, then all wrong
    acc = Accuracy(thrs=None)
    acc.add(first, labels)
    assert acc.compute(size=8) == {"top1": 1.0}
    acc.add(second, labels)
    with pytest.raises(ValueError, match=r"reset\(\)"):
        acc.compute(size=8)
    acc.reset()
    acc.add(second, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert acc.compute(size=8) == {"top1": 0.0}


def test_the_readme_states_the_check_exit_rule_the_cli_applies():
    # the CLI counts a backend that lacks only its hardware (torch_cuda on a CPU-only machine) as no failure
    # (tests/core/registry/test_cli_and_imports.py runs it): --help and the README must both say so
    help_text = subprocess.run(
        [sys.executable, "-m", "mmeval", "backends", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    assert "torch_cuda without CUDA" in " ".join(help_text.split())
    config = " ".join(_section("Configuration").split())
    assert "3 when all load but some cannot run here" in config
    assert (
        "`torch_cuda` on a CPU-only machine -- is listed as `no-hardware` and does not change the exit code" in config
    )


def test_the_multi_node_torchrun_recipe_initialises_the_process_group():
    recipe = _section("Multi-node launch recipes")
    torchrun = recipe.split("torchrun --nnodes", 1)[0].rsplit("```bash", 1)[1]
    assert "init_process_group" in torchrun


def test_every_setting_of_the_distributed_layer_is_in_the_readme_table():
    read = set()
    for path in [*(ROOT / "core" / "src" / "mmeval" / "core").rglob("*.py"), ROOT / "core/src/mmeval/cli.py"]:
        read.update(re.findall(r"MMEVAL_[A-Z0-9_]*[A-Z0-9]", path.read_text()))
    table = [line for line in _section("Configuration").splitlines() if line.startswith("| `MMEVAL_")]
    listed = set(re.findall(r"`(MMEVAL_[A-Z0-9_]*[A-Z0-9])", "\n".join(table)))
    assert "MMEVAL_AUTO_SELECT_TIMEOUT" in read
    assert read <= listed, f"settings missing from the README's table: {sorted(read - listed)}"


@pytest.mark.parametrize("metric", [Accuracy, SingleLabelMetric])
def test_one_hot_labels_are_refused_with_argmax_named(metric):
    labels = np.array([0, 2, 1, 2])
    m = metric()
    with pytest.raises(ValueError, match=r"one-hot labels\? .*argmax") as info:
        m.add(np.random.default_rng(0).random((4, 3)), np.eye(3)[labels])
    assert "(4, 3)" in str(info.value)
    m.reset()  # a refused add() is remembered until reset(): compute() would raise naming it
    m.add(np.eye(3)[labels], np.eye(3)[labels].argmax(1))  # the advice works
    assert m.compute() is not None
