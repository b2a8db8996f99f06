"""What the registry says when a name is wrong (issue 16 items 8-9, issue 13 item 4).

The core env installs no framework plugin: ``torch_cpu``, ``mpi4py``, ... stand for "known but not installed".
"""

from __future__ import annotations

import pytest

from mmeval import Accuracy
from mmeval.core import dist
from mmeval.core.dist import get_default_dist_backend, get_dist_backend, set_default_dist_backend
from mmeval.core.errors import BackendNotFoundError, InvalidBackendNameError

INSTALLED = set(dist.list_all_backends())


def test_a_typo_gets_the_list_and_the_closest_name():
    with pytest.raises(BackendNotFoundError) as info:
        get_dist_backend("torch_gpu")
    msg = str(info.value)
    assert "Did you mean 'torch_cpu'?" in msg
    assert "Installed backends: " in msg and "non_dist" in msg
    with pytest.raises(BackendNotFoundError, match="Did you mean 'star'"):
        set_default_dist_backend("strar")
    with pytest.raises(BackendNotFoundError, match="Did you mean 'non_dist'"):
        Accuracy(dist_backend="nondist")


def test_no_suggestion_for_a_name_like_nothing():
    with pytest.raises(BackendNotFoundError) as info:
        get_dist_backend("qqqqqqqq")
    assert "Did you mean" not in str(info.value)


@pytest.mark.parametrize("value", ["torch_gpu", "Torch-CPU"])
def test_a_bad_env_default_surfaces_when_the_default_is_first_read(monkeypatch, value):
    monkeypatch.setenv("MMEVAL_DIST_BACKEND", value)
    with pytest.raises((BackendNotFoundError, InvalidBackendNameError)) as info:
        get_default_dist_backend()
    msg = str(info.value)
    assert f"MMEVAL_DIST_BACKEND={value!r}" in msg and "environment variable" in msg
    # a metric built with no dist_backend reads the default: the typo surfaces there, before any evaluation
    with pytest.raises((BackendNotFoundError, InvalidBackendNameError), match="MMEVAL_DIST_BACKEND"):
        Accuracy()
    if value == "torch_gpu":
        assert "Did you mean 'torch_cpu'?" in msg


def test_a_good_env_default_is_returned(monkeypatch):
    monkeypatch.setenv("MMEVAL_DIST_BACKEND", "star")
    assert get_default_dist_backend() == "star"
    monkeypatch.setenv("MMEVAL_DIST_BACKEND", "auto")
    assert get_default_dist_backend() == "auto"
    set_default_dist_backend("non_dist")  # an explicit default wins over the variable
    monkeypatch.setenv("MMEVAL_DIST_BACKEND", "torch_gpu")
    assert get_default_dist_backend() == "non_dist"


@pytest.mark.parametrize("name", ["torch_cpu", "mpi4py", "tf_horovod"])
def test_install_hint_gives_pypi_and_source_checkout_commands(name):
    msg = dist.install_hint(name) or ""
    if name not in INSTALLED:  # the core env installs no framework plugin: the error carries the hint
        with pytest.raises(BackendNotFoundError) as info:
            get_dist_backend(name)
        assert msg in str(info.value)
    dist_name = dist.KNOWN_DISTRIBUTIONS[name]
    assert f"pip install {dist_name}" in msg or f"pip install '{dist_name}'" in msg
    assert "from the root of a checkout of the mmeval repository" in msg
    path = {
        "torch_cpu": "./plugins/torch_backend",
        "mpi4py": "./plugins/mpi_backend",
        "tf_horovod": "'./plugins/horovod_backend[tensorflow]'",
    }[name]
    assert f"`pip install {path}`" in msg
    # the source directories named exist in this repository
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[3]
    for local in dist.SOURCE_CHECKOUT_PATHS.values():
        if local.endswith(("paddle_backend", "jax_backend")) and not (root / local).exists():
            continue  # being built by other work; their names stay hints for an installed wheel
        assert (root / local / "pyproject.toml").exists(), local


@pytest.mark.parametrize("name", ["oneflow_cpu", "oneflow_cuda", "npu"])
def test_unsupported_mmeval_backends_say_so(name):
    for ask in (get_dist_backend, set_default_dist_backend):
        with pytest.raises(BackendNotFoundError) as info:
            ask(name)
        msg = str(info.value)
        assert "not supported by mmeval" in msg and "docs/writing-a-backend.md" in msg
        assert ("placeholder" in msg) if name.startswith("oneflow") else ("Ascend" in msg)
        assert isinstance(info.value, AssertionError)  # MMEval 0.2.1 asserted on unknown names


def test_an_installed_backend_of_an_unsupported_name_is_used():
    """A third party may provide 'npu': the registry then uses it instead of refusing the name."""
    from mmeval.core.dist_backends import NonDist

    class MyNPU(NonDist):
        name = "npu"

    dist.register_dist_backend("npu", MyNPU)
    assert type(get_dist_backend("npu")) is MyNPU
