"""The plugin in one process: registration, cheap import, detection, group validation, block sizes."""

from __future__ import annotations

import subprocess
import sys

import pytest
from mmeval_jax import JaxDist, bucket_size
from mmeval_jax.backend import BLOCK_ALIGN


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_importing_the_plugin_and_listing_backends_never_imports_jax() -> None:
    out = _python(
        "import sys, mmeval_jax\n"
        "from mmeval.core.dist import list_all_backends, get_dist_backend_class\n"
        "names = list_all_backends()\n"
        "cls = get_dist_backend_class('jax')\n"
        "print('jax' in names, cls.__name__, cls.detect(), 'jax' in sys.modules)"
    )
    assert out == "True JaxDist False False"


def test_detect_is_false_with_jax_imported_but_not_distributed() -> None:
    out = _python(
        "import jax, jax.numpy as jnp; jnp.zeros(1).block_until_ready()\n"
        "from mmeval_jax import JaxDist\n"
        "from mmeval.core.dist import get_dist_backend\n"
        "b = JaxDist()\n"
        "print(JaxDist.detect(), b.is_initialized, get_dist_backend(None).name)"
    )
    assert out == "False False non_dist"


def test_backend_metadata() -> None:
    assert JaxDist.name == "jax"
    assert isinstance(JaxDist.priority, int) and JaxDist.priority < 20


@pytest.mark.parametrize("group", [[], [0, 0], [-1, 1]])
def test_bad_groups_are_refused_with_the_rule(group: list) -> None:
    with pytest.raises(ValueError, match="distinct, non-negative process indices"):
        JaxDist(group)


@pytest.mark.parametrize("device", [-1, 1.5, True, "1"])
def test_bad_devices_are_refused_with_the_rule(device: object) -> None:
    with pytest.raises(ValueError, match="non-negative index of each process's local devices"):
        JaxDist(device=device)  # type: ignore[arg-type]


def test_groups_on_other_devices_are_other_groups() -> None:
    """A new group over the same processes: another device, another sequence (and poisoning) key."""
    keys = {
        JaxDist([0, 1])._sequence_key(),
        JaxDist([0, 1], device=1)._sequence_key(),
        JaxDist([1, 0], device=1)._sequence_key(),
    }
    assert len(keys) == 3


def test_primitives_take_the_call_contract() -> None:
    """No primitive of the previous (fill, timeout) contract: no DeprecationWarning, no compatibility adapter."""
    import inspect

    for name in ("_exchange_slots", "_all_gather_bytes", "_gather_bytes", "_broadcast_bytes"):
        params = list(inspect.signature(getattr(JaxDist, name)).parameters)
        assert params[:2] == ["self", "call"], (name, params)


def test_timeout_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMEVAL_JAX_TIMEOUT", "7.5")
    assert JaxDist().timeout == 7.5
    assert JaxDist(timeout=2).timeout == 2.0


def test_bucket_sizes_cover_the_frame_with_little_padding_and_few_shapes() -> None:
    sizes = set()
    for n in list(range(0, 5000)) + [10**6, 8 * 10**6 + 3, 3 << 30]:
        b = bucket_size(n)
        sizes.add(b)
        assert b >= n and b % BLOCK_ALIGN == 0
        assert b <= max(BLOCK_ALIGN, n * 1.125 + BLOCK_ALIGN), (n, b)
    assert len([s for s in sizes if s <= 5000]) < 50
    with pytest.raises(ValueError):
        bucket_size(-1)
